package nodeproc

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/raftmq/raftmq/node"
)

// Errors of Proc operations.
var (
	ErrRunning    = errors.New("nodeproc: process is still running")
	ErrNotRunning = errors.New("nodeproc: process has exited")
	ErrUnhealthy  = errors.New("nodeproc: node did not become healthy")
)

// killWait bounds the wait for a process to exit after SIGKILL.
const killWait = 10 * time.Second

// pollInterval is how often /healthz and /status are polled.
const pollInterval = 50 * time.Millisecond

// Spec describes one node process. Addresses are host:port.
type Spec struct {
	ID, Dir                     string
	RaftAddr, APIAddr, HTTPAddr string
	// RemotingAddr and NamesrvAddr are the RocketMQ broker and name-server
	// addresses; "" passes them as "" (off), so that nodes sharing a host
	// do not all bind the defaults.
	RemotingAddr, NamesrvAddr string
	// NoRemotingFlags leaves --remoting-addr and --namesrv-addr out: for a
	// node built before they existed (the bench's -baseline 84a99e6).
	NoRemotingFlags bool
	Bootstrap       bool
	Peers           string   // "n1=addr,n2=addr,..." (raft addrs), with Bootstrap
	Join            string   // API address of any member
	Prefix          []string // command prefix, e.g. {"ip","netns","exec","ns1"}
	Env             []string // extra environment (RAFTMQ_*)
	Args            []string // extra flags
	LogPath         string   // stdout+stderr appended here (default Dir+".log")
	WorkDir         string   // working directory of the process (default: the caller's)
	// Bare passes none of the ID, Dir, address, Bootstrap, Peers and Join
	// flags: the node runs on its defaults (or Env/Args), and the address
	// fields only tell the harness where it listens.
	Bare bool
	// HTTPTLS, if set, is how the harness reaches the node's HTTP address
	// (https): for nodes run with --tls-cert.
	HTTPTLS *tls.Config
	// OnSlowKill, if set, runs when a SIGKILLed process has not exited
	// within killWait, after its kernel stacks were logged: e.g. to dump the
	// state of a FUSE daemon the process may be waiting on.
	OnSlowKill func()
}

// logPath is where the process output goes.
func (s Spec) logPath() string {
	if s.LogPath != "" {
		return s.LogPath
	}
	return strings.TrimRight(s.Dir, "/") + ".log"
}

// argv is the full command line: prefix, binary, flags.
func (s Spec) argv(nodeBin string) []string {
	argv := append(append([]string{}, s.Prefix...), nodeBin)
	if s.Bare {
		return append(argv, s.Args...)
	}
	add := func(flag, v string) {
		if v != "" {
			argv = append(argv, "--"+flag, v)
		}
	}
	add("id", s.ID)
	add("dir", s.Dir)
	add("raft-addr", s.RaftAddr)
	add("api-addr", s.APIAddr)
	add("http-addr", s.HTTPAddr)
	if !s.NoRemotingFlags {
		argv = append(argv, "--remoting-addr", s.RemotingAddr, "--namesrv-addr", s.NamesrvAddr)
	}
	if s.Bootstrap {
		argv = append(argv, "--bootstrap")
	}
	add("peers", s.Peers)
	add("join", s.Join)
	return append(argv, s.Args...)
}

// Proc is one running (or exited) node process.
type Proc struct {
	bin  Binaries
	http *http.Client

	mu     sync.Mutex
	spec   Spec
	cmd    *exec.Cmd
	exited chan struct{}
	state  *os.ProcessState // set before exited is closed
}

// Start starts a node process with its stdout and stderr appended to the
// spec's log file. It does not wait for the node to serve (see WaitHealthy).
func Start(bin Binaries, spec Spec) (*Proc, error) {
	hc := &http.Client{Timeout: 5 * time.Second}
	if spec.HTTPTLS != nil {
		hc.Transport = &http.Transport{TLSClientConfig: spec.HTTPTLS}
	}
	p := &Proc{bin: bin, spec: spec, http: hc}
	if err := p.start(); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Proc) start() error {
	logFile, err := os.OpenFile(p.spec.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("nodeproc: node %s log: %w", p.spec.ID, err)
	}
	defer logFile.Close() // the child holds its own copy
	fmt.Fprintf(logFile, "=== nodeproc %s start %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(p.spec.argv(p.bin.Node), " "))
	argv := p.spec.argv(p.bin.Node)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), p.spec.Env...)
	cmd.Dir = p.spec.WorkDir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("nodeproc: start node %s: %w", p.spec.ID, err)
	}
	exited := make(chan struct{})
	p.cmd, p.exited, p.state = cmd, exited, nil
	go p.wait(cmd, exited)
	return nil
}

// wait reaps the process and publishes its exit state.
func (p *Proc) wait(cmd *exec.Cmd, exited chan struct{}) {
	_ = cmd.Wait()
	p.mu.Lock()
	p.state = cmd.ProcessState
	p.mu.Unlock()
	close(exited)
}

// Spec returns the spec the process was (last) started with.
func (p *Proc) Spec() Spec {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.spec
}

// PID is the process id of the current (or last) incarnation.
func (p *Proc) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

// LogPath is the file the process output is appended to.
func (p *Proc) LogPath() string { return p.Spec().logPath() }

// Exited is closed when the current incarnation has exited.
func (p *Proc) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exited
}

// Running reports whether the current incarnation has not exited yet.
func (p *Proc) Running() bool {
	select {
	case <-p.Exited():
		return false
	default:
		return true
	}
}

// ExitCode is the exit code of the last incarnation (-1 if killed by a
// signal), or ErrRunning while it runs.
func (p *Proc) ExitCode() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == nil {
		return 0, ErrRunning
	}
	return p.state.ExitCode(), nil
}

// signal sends sig to the process by PID unless it has exited.
func (p *Proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != nil {
		return ErrNotRunning
	}
	if err := syscall.Kill(p.cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("nodeproc: %v to node %s (pid %d): %w", sig, p.spec.ID, p.cmd.Process.Pid, err)
	}
	return nil
}

// Kill sends SIGKILL and waits for the exit. Killing an exited process is a no-op.
func (p *Proc) Kill() error {
	exited := p.Exited()
	if err := p.signal(syscall.SIGKILL); err != nil {
		if errors.Is(err, ErrNotRunning) {
			return nil
		}
		return err
	}
	start := time.Now()
	select {
	case <-exited:
		return nil
	case <-time.After(killWait):
	}
	// A SIGKILLed process that has not exited is held in the kernel: a
	// thread waits uninterruptibly (state D), e.g. on a FUSE request its
	// daemon has not answered. Record where every thread waits, then give
	// it killGrace more to tell a slow exit from a hung one.
	p.logKernelStacks()
	if f := p.Spec().OnSlowKill; f != nil {
		f()
	}
	select {
	case <-exited:
		return fmt.Errorf("nodeproc: node %s (pid %d) still running %v after SIGKILL; it exited after %v (kernel stacks in %s)",
			p.Spec().ID, p.PID(), killWait, time.Since(start).Round(time.Millisecond), p.LogPath())
	case <-time.After(killGrace):
		return fmt.Errorf("nodeproc: node %s (pid %d) still running %v after SIGKILL (kernel stacks in %s)",
			p.Spec().ID, p.PID(), time.Since(start).Round(time.Millisecond), p.LogPath())
	}
}

// killGrace is how long Kill keeps waiting, after killWait and the stack
// dump, to measure how long a slow exit takes.
const killGrace = 50 * time.Second

// logKernelStacks appends each thread's state, wait channel and kernel
// stack (/proc/PID/task/TID/{stat,wchan,stack}; the stack needs root) to
// the node's log.
func (p *Proc) logKernelStacks() {
	pid := p.PID()
	logFile, err := os.OpenFile(p.LogPath(), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "=== nodeproc %s pid %d still running %v after SIGKILL: kernel stacks\n", time.Now().Format(time.RFC3339Nano), pid, killWait)
	tids, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, t := range tids {
		dir := fmt.Sprintf("/proc/%d/task/%s/", pid, t.Name())
		stat, _ := os.ReadFile(dir + "stat")
		wchan, _ := os.ReadFile(dir + "wchan")
		stack, _ := os.ReadFile(dir + "stack")
		state := "?"
		if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) {
			state = string(stat[i+2])
		}
		fmt.Fprintf(logFile, "--- tid %s state %s wchan %s\n%s", t.Name(), state, wchan, stack)
	}
}

// Stop sends SIGTERM (and SIGCONT, in case it is paused), waits for the exit
// and returns the exit code. When ctx ends first the process gets SIGKILL
// and the ctx error is returned with the code.
func (p *Proc) Stop(ctx context.Context) (int, error) {
	exited := p.Exited()
	if err := p.signal(syscall.SIGTERM); err == nil {
		_ = p.signal(syscall.SIGCONT)
	}
	select {
	case <-exited:
		return p.ExitCode()
	case <-ctx.Done():
	}
	p.dumpGoroutines(exited)
	if err := p.Kill(); err != nil {
		return -1, err
	}
	code, _ := p.ExitCode()
	return code, fmt.Errorf("nodeproc: node %s did not exit after SIGTERM, killed (goroutine dump in %s): %w",
		p.Spec().ID, p.Spec().logPath(), ctx.Err())
}

// dumpGoroutines sends SIGQUIT to a node that ignored SIGTERM: the Go
// runtime writes every goroutine's stack to the node's log and exits, so a
// hung shutdown can be diagnosed. It waits for the exit at most 3 seconds.
func (p *Proc) dumpGoroutines(exited <-chan struct{}) {
	if p.signal(syscall.SIGQUIT) != nil {
		return
	}
	t := time.NewTimer(3 * time.Second)
	defer t.Stop()
	select {
	case <-exited:
	case <-t.C:
	}
}

// Hangup sends SIGHUP: the node reloads its TLS files and auth file.
func (p *Proc) Hangup() error { return p.signal(syscall.SIGHUP) }

// Pause stops the process with SIGSTOP and waits (bounded) until every
// thread has stopped: kill(2) returns before a running thread is stopped.
func (p *Proc) Pause() error {
	if err := p.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	return p.waitStopped(true)
}

// Resume continues a paused process with SIGCONT and waits until it runs.
func (p *Proc) Resume() error {
	if err := p.signal(syscall.SIGCONT); err != nil {
		return err
	}
	return p.waitStopped(false)
}

// waitStopped polls /proc/PID/stat until the process is (or is no longer)
// in state T. Without /proc it returns at once.
func (p *Proc) waitStopped(stopped bool) error {
	pid := p.PID()
	deadline := time.Now().Add(killWait)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return nil // no procfs, or the process is gone
		}
		// "pid (comm) S ...": the state follows the last ')'.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) || (b[i+2] == 'T') == stopped {
			return nil
		}
		time.Sleep(time.Millisecond)
	}
	return fmt.Errorf("nodeproc: node %s (pid %d) did not reach stopped=%v in %v", p.Spec().ID, pid, stopped, killWait)
}

// Restart starts the process again with the same spec minus Bootstrap. The
// previous incarnation must have exited.
func (p *Proc) Restart() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == nil {
		return ErrRunning
	}
	p.spec.Bootstrap = false
	return p.start()
}

// Member is one entry of Status.Members.
type Member = node.MemberJSON

// Status is the node's /status JSON.
type Status = node.StatusJSON

// Status fetches GET http://HTTPAddr/status.
func (p *Proc) Status(ctx context.Context) (Status, error) {
	var s Status
	body, code, err := p.get(ctx, "/status")
	if err != nil {
		return s, err
	}
	if code != http.StatusOK {
		return s, fmt.Errorf("nodeproc: node %s /status: HTTP %d: %s", p.Spec().ID, code, body)
	}
	if err := json.Unmarshal(body, &s); err != nil {
		return s, fmt.Errorf("nodeproc: node %s /status: %w", p.Spec().ID, err)
	}
	return s, nil
}

// Healthy reports whether /healthz answers 200 now.
func (p *Proc) Healthy(ctx context.Context) bool {
	_, code, err := p.get(ctx, "/healthz")
	return err == nil && code == http.StatusOK
}

// WaitHealthy polls /healthz until it answers 200. It fails early, with the
// tail of the log, when the process exits, and when ctx ends.
func (p *Proc) WaitHealthy(ctx context.Context) error { return p.WaitHealthyEvery(ctx, pollInterval) }

// WaitHealthyEvery is WaitHealthy polling every interval: a benchmark that
// times a restart of tens of milliseconds polls more often than the
// default 50 ms, which would round its measure.
func (p *Proc) WaitHealthyEvery(ctx context.Context, interval time.Duration) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	exited := p.Exited()
	for {
		if p.Healthy(ctx) {
			return nil
		}
		select {
		case <-exited:
			code, _ := p.ExitCode()
			return fmt.Errorf("%w: node %s exited with code %d; log %s ends:\n%s", ErrUnhealthy, p.Spec().ID, code, p.LogPath(), p.LogTail(20))
		case <-ctx.Done():
			return fmt.Errorf("%w: node %s: %w; log %s ends:\n%s", ErrUnhealthy, p.Spec().ID, ctx.Err(), p.LogPath(), p.LogTail(20))
		case <-tick.C:
		}
	}
}

// Get fetches path from the node's HTTP address and returns the body of a
// 200 answer.
func (p *Proc) Get(ctx context.Context, path string) ([]byte, error) {
	body, code, err := p.get(ctx, path)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return body, fmt.Errorf("nodeproc: node %s %s: HTTP %d", p.Spec().ID, path, code)
	}
	return body, nil
}

// get performs one GET against the node's HTTP address.
func (p *Proc) get(ctx context.Context, path string) ([]byte, int, error) {
	scheme := "http://"
	if p.Spec().HTTPTLS != nil {
		scheme = "https://"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+p.Spec().HTTPAddr+path, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("nodeproc: %w", err)
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("nodeproc: node %s: %w", p.Spec().ID, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, 0, fmt.Errorf("nodeproc: node %s: %w", p.Spec().ID, err)
	}
	return body, resp.StatusCode, nil
}

// LogTail returns the last n lines of the process log (for error messages).
func (p *Proc) LogTail(n int) string {
	b, err := os.ReadFile(p.LogPath())
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
