package clustertest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// nsPrefix names every namespace this package creates: rmqct-<pid>-hub and
// rmqct-<pid>-n<i>. The pid lets a run remove what a crashed run left behind
// without touching a run that is still going.
const nsPrefix = "rmqct-"

// Ports every namespaced node listens on (each node has its own address).
const (
	nsRaftPort = 7000
	nsAPIPort  = 9000
	nsHTTPPort = 8000
)

// netLab is a private network: a bridge in a hub namespace, one namespace
// per node with a veth to the bridge, and one veth from the root namespace
// (the test process) to the bridge. Traffic never leaves the machine.
type netLab struct {
	pid    int
	subnet int // third octet of 10.77.X.0/24
	hub    string
	nodes  []string // namespace per node
	rootIf string

	mu      sync.Mutex
	proxies []*delayProxy
}

// netAvailable says whether namespaces can be used, or why not.
func netAvailable() error {
	if os.Geteuid() != 0 {
		return errors.New("not root")
	}
	for _, tool := range []string{"ip", "iptables", "ss"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not installed (apt-get install -y iproute2 iptables)", tool)
		}
	}
	probe := fmt.Sprintf("%s%d-probe", nsPrefix, os.Getpid())
	if err := run("ip", "netns", "add", probe); err != nil {
		return err
	}
	defer func() { _ = run("ip", "netns", "del", probe) }()
	return run("ip", "netns", "exec", probe, "iptables", "-L", "-n")
}

func run(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func runAll(cmds [][]string) error {
	for _, c := range cmds {
		if err := run(c...); err != nil {
			return err
		}
	}
	return nil
}

// removeStaleNamespaces deletes rmqct-<pid>-* namespaces whose pid is gone.
func removeStaleNamespaces() {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		rest, ok := strings.CutPrefix(name, nsPrefix)
		if !ok {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err == nil && pid != os.Getpid() && processAlive(pid) {
			continue
		}
		_ = run("ip", "netns", "del", name)
	}
}

func processAlive(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}

// pickSubnet returns a third octet for 10.77.X.0/24 not routed yet.
func pickSubnet(pid int) (int, error) {
	out, err := exec.Command("ip", "-4", "addr").Output()
	if err != nil {
		return 0, err
	}
	for k := 0; k < 250; k++ {
		x := (pid+k)%250 + 1
		if !strings.Contains(string(out), fmt.Sprintf("10.77.%d.", x)) {
			return x, nil
		}
	}
	return 0, errors.New("no free 10.77.X.0/24 subnet")
}

// newNetLab builds the namespaces for n nodes.
func newNetLab(n int) (*netLab, error) {
	removeStaleNamespaces()
	pid := os.Getpid()
	x, err := pickSubnet(pid)
	if err != nil {
		return nil, err
	}
	l := &netLab{pid: pid, subnet: x, hub: fmt.Sprintf("%s%d-hub", nsPrefix, pid), rootIf: fmt.Sprintf("rq%dr", pid)}
	for i := 0; i < n; i++ {
		l.nodes = append(l.nodes, fmt.Sprintf("%s%d-n%d", nsPrefix, pid, i+1))
	}
	cmds := [][]string{
		{"ip", "netns", "add", l.hub},
		{"ip", "-n", l.hub, "link", "set", "lo", "up"},
		{"ip", "-n", l.hub, "link", "add", "br0", "type", "bridge"},
		{"ip", "-n", l.hub, "link", "set", "br0", "up"},
		{"ip", "link", "add", l.rootIf, "type", "veth", "peer", "name", "up0", "netns", l.hub},
		{"ip", "addr", "add", l.rootIP() + "/24", "dev", l.rootIf},
		{"ip", "link", "set", l.rootIf, "up"},
		{"ip", "-n", l.hub, "link", "set", "up0", "master", "br0"},
		{"ip", "-n", l.hub, "link", "set", "up0", "up"},
	}
	for i, ns := range l.nodes {
		v := fmt.Sprintf("v%d", i+1)
		cmds = append(cmds,
			[]string{"ip", "netns", "add", ns},
			[]string{"ip", "-n", ns, "link", "set", "lo", "up"},
			[]string{"ip", "link", "add", v, "netns", l.hub, "type", "veth", "peer", "name", "eth0", "netns", ns},
			[]string{"ip", "-n", l.hub, "link", "set", v, "master", "br0"},
			[]string{"ip", "-n", l.hub, "link", "set", v, "up"},
			[]string{"ip", "-n", ns, "addr", "add", l.IP(i) + "/24", "dev", "eth0"},
			[]string{"ip", "-n", ns, "link", "set", "eth0", "up"},
		)
	}
	if err := runAll(cmds); err != nil {
		l.Close()
		return nil, err
	}
	if err := l.waitReachable(); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// waitReachable waits until the root namespace can open a TCP connection
// into each node namespace (addresses settle after DAD/bridge learning).
func (l *netLab) waitReachable() error {
	deadline := time.Now().Add(10 * time.Second)
	for i := range l.nodes {
		for {
			// connection refused proves the path works (nothing listens yet)
			c, err := net.DialTimeout("tcp", net.JoinHostPort(l.IP(i), "1"), 500*time.Millisecond)
			if err == nil {
				c.Close()
				break
			}
			if strings.Contains(err.Error(), "refused") {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("namespace %s not reachable: %w", l.nodes[i], err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

func (l *netLab) rootIP() string { return fmt.Sprintf("10.77.%d.1", l.subnet) }

// IP is node i's address.
func (l *netLab) IP(i int) string { return fmt.Sprintf("10.77.%d.%d", l.subnet, 11+i) }

// Prefix is the command prefix that runs a process in node i's namespace.
func (l *netLab) Prefix(i int) []string { return []string{"ip", "netns", "exec", l.nodes[i]} }

func (l *netLab) inNS(i int, args ...string) error {
	return run(append([]string{"ip", "netns", "exec", l.nodes[i]}, args...)...)
}

// Close removes every namespace (and with them every veth and rule).
func (l *netLab) Close() {
	l.stopProxies()
	for _, ns := range append([]string{l.hub}, l.nodes...) {
		_ = run("ip", "netns", "del", ns)
	}
	_ = run("ip", "link", "del", l.rootIf) // gone with the hub already, normally
}

// cut drops all traffic between node a and node b, both directions, in
// both namespaces. The test process (root address) stays reachable.
func (l *netLab) cut(a, b int) error {
	return runAll([][]string{
		{"ip", "netns", "exec", l.nodes[a], "iptables", "-A", "INPUT", "-s", l.IP(b), "-j", "DROP"},
		{"ip", "netns", "exec", l.nodes[a], "iptables", "-A", "OUTPUT", "-d", l.IP(b), "-j", "DROP"},
		{"ip", "netns", "exec", l.nodes[b], "iptables", "-A", "INPUT", "-s", l.IP(a), "-j", "DROP"},
		{"ip", "netns", "exec", l.nodes[b], "iptables", "-A", "OUTPUT", "-d", l.IP(a), "-j", "DROP"},
	})
}

// isolate cuts node i from every other node.
func (l *netLab) isolate(i int) error {
	for j := range l.nodes {
		if j != i {
			if err := l.cut(i, j); err != nil {
				return err
			}
		}
	}
	return nil
}

// lossy drops a fraction p of the packets node i receives from its peers.
func (l *netLab) lossy(i int, p float64) error {
	for j := range l.nodes {
		if j == i {
			continue
		}
		if err := l.inNS(i, "iptables", "-A", "INPUT", "-s", l.IP(j), "-m", "statistic", "--mode", "random",
			"--probability", strconv.FormatFloat(p, 'f', 2, 64), "-j", "DROP"); err != nil {
			return err
		}
	}
	return nil
}

// killConns destroys node i's established TCP connections to and from its
// peers' Raft ports (both ends see a reset or an error).
func (l *netLab) killConns(i int) error {
	var errs []error
	for j := range l.nodes {
		if j == i {
			continue
		}
		for _, filter := range [][]string{
			{"dst", l.IP(j) + ":" + strconv.Itoa(nsRaftPort)},
			{"src", l.IP(i) + ":" + strconv.Itoa(nsRaftPort), "dst", l.IP(j)},
		} {
			args := append([]string{"ss", "-K", "-t", "state", "established"}, filter...)
			if err := l.inNS(i, args...); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// slow routes node i's Raft traffic (both directions) through delaying
// proxies in the test process, then drops the existing connections so the
// new ones take the proxies.
func (l *netLab) slow(i int, delay time.Duration) error {
	for j := range l.nodes {
		if j == i {
			continue
		}
		for _, pair := range [][2]int{{i, j}, {j, i}} {
			from, to := pair[0], pair[1]
			target := net.JoinHostPort(l.IP(to), strconv.Itoa(nsRaftPort))
			p, err := startDelayProxy(net.JoinHostPort(l.rootIP(), "0"), target, delay)
			if err != nil {
				return err
			}
			l.mu.Lock()
			l.proxies = append(l.proxies, p)
			l.mu.Unlock()
			if err := l.inNS(from, "iptables", "-t", "nat", "-A", "OUTPUT", "-p", "tcp", "-d", l.IP(to),
				"--dport", strconv.Itoa(nsRaftPort), "-j", "DNAT", "--to-destination", p.Addr()); err != nil {
				return err
			}
		}
	}
	for j := range l.nodes {
		_ = l.killConns(j)
	}
	return nil
}

// heal removes every rule in every node namespace, stops the proxies and
// drops the connections that went through them.
func (l *netLab) heal() error {
	var errs []error
	hadProxies := l.stopProxies()
	for i := range l.nodes {
		for _, table := range []string{"filter", "nat"} {
			if err := l.inNS(i, "iptables", "-t", table, "-F"); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if hadProxies {
		for i := range l.nodes {
			_ = l.killConns(i)
		}
	}
	return errors.Join(errs...)
}

func (l *netLab) stopProxies() bool {
	l.mu.Lock()
	ps := l.proxies
	l.proxies = nil
	l.mu.Unlock()
	for _, p := range ps {
		p.Close()
	}
	return len(ps) > 0
}

// proxied is how many connections the current delay proxies accepted.
func (l *netLab) proxied() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, p := range l.proxies {
		p.mu.Lock()
		n += p.accepted
		p.mu.Unlock()
	}
	return n
}

// delayProxy forwards TCP connections to target, delivering every chunk
// delay after it was read (order kept), in both directions.
type delayProxy struct {
	ln       net.Listener
	target   string
	delay    time.Duration
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	accepted int
	closed   bool
	wg       sync.WaitGroup
}

func startDelayProxy(listen, target string, delay time.Duration) (*delayProxy, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	p := &delayProxy{ln: ln, target: target, delay: delay, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *delayProxy) Addr() string { return p.ln.Addr().String() }

func (p *delayProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *delayProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			return
		}
		p.mu.Lock()
		p.accepted++
		p.mu.Unlock()
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *delayProxy) serve(in net.Conn) {
	defer p.wg.Done()
	out, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil || !p.track(out) {
		in.Close()
		return
	}
	var pipes sync.WaitGroup
	pipes.Add(2)
	go func() { defer pipes.Done(); p.pipe(out, in) }()
	go func() { defer pipes.Done(); p.pipe(in, out) }()
	pipes.Wait()
}

type chunk struct {
	at   time.Time
	data []byte
}

// pipe copies src to dst, holding each chunk for the delay. Either side
// failing closes both.
func (p *delayProxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	q := make(chan chunk, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range q {
			time.Sleep(time.Until(c.at.Add(p.delay)))
			if _, err := dst.Write(c.data); err != nil {
				src.Close()
				for range q { // drain until the reader stops
				}
				return
			}
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			q <- chunk{at: time.Now(), data: append([]byte(nil), buf[:n]...)}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				dst.Close()
			}
			break
		}
	}
	close(q)
	<-done
}

// Close stops accepting, closes every connection and waits for the
// goroutines.
func (p *delayProxy) Close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}
