package nodeproc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrNoLeader is returned by Leader when the live nodes did not agree on a
// live leader before ctx ended.
var ErrNoLeader = errors.New("nodeproc: no agreed leader")

// ClusterOptions describe N nodes bootstrapped together.
type ClusterOptions struct {
	N       int                  // nodes (default 3)
	Dir     string               // parent of the data dirs n1, n2, ... and logs n1.log, ... (required)
	Host    string               // host of every address (default 127.0.0.1)
	Prefix  func(i int) []string // command prefix of node i (e.g. ip netns exec)
	HostFor func(i int) string   // host of node i (overrides Host)
	Env     []string             // extra environment of every node
	Args    []string             // extra flags of every node
	ArgsFor func(i int) []string // extra flags of node i (after Args)
	// NoAnnounce: do not wait for member API addresses (for programs that
	// speak the node's flags and /status but have no client API, like the
	// bench's bare-Raft ceiling).
	NoAnnounce bool
	// HTTPTLS is how the harness reaches HTTP (Spec.HTTPTLS); CLIArgs come
	// first in every CLI call (e.g. --tls-ca and --token).
	HTTPTLS *tls.Config
	CLIArgs []string
	// Remoting gives every node a RocketMQ broker and name-server address
	// (free ports); without it both are off.
	Remoting bool
	// NoRemotingFlags: the nodes predate --remoting-addr (Spec).
	NoRemotingFlags bool
}

// portsPerNode is how many ports clusterSpecs takes for each node.
func (o ClusterOptions) portsPerNode() int {
	if o.Remoting {
		return 5
	}
	return 3
}

func (o ClusterOptions) host(i int) string {
	if o.HostFor != nil {
		return o.HostFor(i)
	}
	if o.Host != "" {
		return o.Host
	}
	return "127.0.0.1"
}

// Cluster is N node processes bootstrapped together.
type Cluster struct {
	Bin   Binaries
	Nodes []*Proc
	// CLIArgs come first in every CLI call (ClusterOptions.CLIArgs).
	CLIArgs []string
}

// startAttempts bounds the retries of a cluster start that lost a port race
// (another process bound a port between FreePorts and the node's listen).
const startAttempts = 3

// StartCluster starts every node with --bootstrap and the full --peers list,
// then waits for all of them to be healthy and for an agreed leader. A start
// that lost a port race is retried on new ports. On any error it kills what
// it started.
func StartCluster(ctx context.Context, bin Binaries, opts ClusterOptions) (*Cluster, error) {
	if opts.N == 0 {
		opts.N = 3
	}
	if opts.Dir == "" {
		return nil, errors.New("nodeproc: ClusterOptions.Dir is required")
	}
	for attempt := 1; ; attempt++ {
		c, err := startClusterOnce(ctx, bin, opts)
		if err == nil || attempt == startAttempts || !c.lostPortRace() {
			return c, err
		}
		for _, d := range c.Dirs() {
			if err := emptyDir(d); err != nil {
				return nil, fmt.Errorf("nodeproc: clean %s for a retry: %w", d, err)
			}
		}
	}
}

// startClusterOnce is one attempt of StartCluster. On error the returned
// cluster (if any) has every process killed, for lostPortRace to inspect.
func startClusterOnce(ctx context.Context, bin Binaries, opts ClusterOptions) (*Cluster, error) {
	specs, err := clusterSpecs(opts)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Bin: bin, CLIArgs: opts.CLIArgs}
	for _, spec := range specs {
		p, err := Start(bin, spec)
		if err != nil {
			_ = c.killAll()
			return c, err
		}
		c.Nodes = append(c.Nodes, p)
	}
	for _, p := range c.Nodes {
		if err := p.WaitHealthy(ctx); err != nil {
			_ = c.killAll()
			return c, err
		}
	}
	if _, err := c.Leader(ctx); err != nil {
		_ = c.killAll()
		return c, err
	}
	if opts.NoAnnounce {
		return c, nil
	}
	if err := c.WaitAnnounced(ctx); err != nil {
		_ = c.killAll()
		return c, err
	}
	return c, nil
}

// WaitAnnounced polls /status of the running nodes until each lists every
// node of the cluster with its API address: bootstrapped members announce
// theirs through Raft after the election, so a test that compares state
// before and after an action starts from a cluster that has settled.
func (c *Cluster) WaitAnnounced(ctx context.Context) error {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		missing := c.unannounced(ctx)
		if missing == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nodeproc: waiting for member API addresses (%s): %w", missing, ctx.Err())
		case <-tick.C:
		}
	}
}

// unannounced names the first node whose status lacks a member's API
// address, or "" when none does.
func (c *Cluster) unannounced(ctx context.Context) string {
	for _, p := range c.Nodes {
		if !p.Running() {
			continue
		}
		st, err := p.Status(ctx)
		if err != nil {
			return fmt.Sprintf("%s: %v", p.Spec().ID, err)
		}
		known := map[string]bool{}
		for _, m := range st.Members {
			if m.APIAddr != "" {
				known[m.ID] = true
			}
		}
		for _, q := range c.Nodes {
			if !known[q.Spec().ID] {
				return fmt.Sprintf("%s does not know %s's", p.Spec().ID, q.Spec().ID)
			}
		}
	}
	return ""
}

// lostPortRace reports whether a node of a failed start could not bind.
func (c *Cluster) lostPortRace() bool {
	if c == nil {
		return false
	}
	for _, p := range c.Nodes {
		if strings.Contains(p.LogTail(5), "address already in use") {
			return true
		}
	}
	return false
}

// clusterSpecs assigns each node three free ports on its host (five with
// Remoting); the ports of one host are taken in one FreePorts call so they
// are distinct.
func clusterSpecs(opts ClusterOptions) ([]Spec, error) {
	perHost := map[string]int{}
	for i := range opts.N {
		perHost[opts.host(i)] += opts.portsPerNode()
	}
	free := map[string][]int{}
	for host, n := range perHost {
		ports, err := FreePorts(host, n)
		if err != nil {
			return nil, err
		}
		free[host] = ports
	}
	specs := make([]Spec, opts.N)
	peers := make([]string, opts.N)
	for i := range specs {
		host := opts.host(i)
		k := opts.portsPerNode()
		ports := free[host][:k]
		free[host] = free[host][k:]
		id := "n" + strconv.Itoa(i+1)
		addr := func(k int) string { return net.JoinHostPort(host, strconv.Itoa(ports[k])) }
		specs[i] = Spec{ID: id, Dir: filepath.Join(opts.Dir, id), RaftAddr: addr(0), APIAddr: addr(1), HTTPAddr: addr(2),
			Bootstrap: true, Env: opts.Env, Args: opts.Args, HTTPTLS: opts.HTTPTLS, NoRemotingFlags: opts.NoRemotingFlags}
		if opts.Remoting {
			specs[i].RemotingAddr, specs[i].NamesrvAddr = addr(3), addr(4)
		}
		if opts.Prefix != nil {
			specs[i].Prefix = opts.Prefix(i)
		}
		if opts.ArgsFor != nil {
			specs[i].Args = append(append([]string{}, opts.Args...), opts.ArgsFor(i)...)
		}
		peers[i] = id + "=" + specs[i].RaftAddr
	}
	for i := range specs {
		specs[i].Peers = strings.Join(peers, ",")
	}
	return specs, nil
}

// WaitHealthy waits until every running node answers /healthz with 200.
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	for _, p := range c.Nodes {
		if !p.Running() {
			continue
		}
		if err := p.WaitHealthy(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Leader polls /status of the running nodes until they all name the same
// leader, which is running and reports itself as Leader; it returns that
// node's index into Nodes.
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	last := "no status polled"
	for {
		idx, why := c.agreedLeader(ctx)
		if idx >= 0 {
			return idx, nil
		}
		last = why
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("%w: %s: %w", ErrNoLeader, last, ctx.Err())
		case <-tick.C:
		}
	}
}

// agreedLeader is one poll of Leader: the index, or -1 and why not.
func (c *Cluster) agreedLeader(ctx context.Context) (int, string) {
	leader := ""
	for _, p := range c.Nodes {
		if !p.Running() {
			continue
		}
		s, err := p.Status(ctx)
		if err != nil {
			return -1, err.Error()
		}
		if s.LeaderID == "" || (leader != "" && s.LeaderID != leader) {
			return -1, fmt.Sprintf("node %s sees leader %q, others %q", s.ID, s.LeaderID, leader)
		}
		leader = s.LeaderID
	}
	idx := c.Index(leader)
	if idx < 0 || !c.Nodes[idx].Running() {
		return -1, fmt.Sprintf("leader %q is not a running node", leader)
	}
	s, err := c.Nodes[idx].Status(ctx)
	if err != nil || s.State != "Leader" {
		return -1, fmt.Sprintf("leader %q does not report state Leader yet", leader)
	}
	return idx, ""
}

// Index is the index of the node with this id, or -1.
func (c *Cluster) Index(id string) int {
	for i, p := range c.Nodes {
		if p.Spec().ID == id {
			return i
		}
	}
	return -1
}

// APIAddrs are the API addresses of all nodes (client seeds, --server).
func (c *Cluster) APIAddrs() []string {
	out := make([]string, len(c.Nodes))
	for i, p := range c.Nodes {
		out[i] = p.Spec().APIAddr
	}
	return out
}

// Dirs are the data directories of all nodes.
func (c *Cluster) Dirs() []string {
	out := make([]string, len(c.Nodes))
	for i, p := range c.Nodes {
		out[i] = p.Spec().Dir
	}
	return out
}

// Stop sends SIGTERM to all running nodes at once and waits for them; a
// node still running when ctx ends gets SIGKILL. It never leaves a process
// behind. The error reports nodes that did not exit 0 on SIGTERM.
func (c *Cluster) Stop(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, len(c.Nodes))
	for i, p := range c.Nodes {
		if !p.Running() {
			continue
		}
		wg.Go(func() {
			code, err := p.Stop(ctx)
			if err == nil && code != 0 {
				err = fmt.Errorf("nodeproc: node %s exited with code %d on SIGTERM; log %s ends:\n%s", p.Spec().ID, code, p.LogPath(), p.LogTail(10))
			}
			errs[i] = err
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// killAll sends SIGKILL to every running node (cleanup of a failed start).
func (c *Cluster) killAll() error {
	var errs []error
	for _, p := range c.Nodes {
		errs = append(errs, p.Kill())
	}
	return errors.Join(errs...)
}

// CLI runs the raftmq CLI with --server set to all API addresses and
// returns its combined output. A non-zero exit is an *exec.ExitError. A CLI
// still running when ctx ends gets SIGQUIT, so that its output ends with
// every goroutine's stack (where it hung), and SIGKILL 5 s later.
func (c *Cluster) CLI(ctx context.Context, args ...string) ([]byte, error) {
	return c.CLIWatched(ctx, nil, args...)
}

// CLIWatched is CLI with a hook: when ctx ends while the CLI runs,
// onStall(pid) runs first (to look at the process, e.g. its sockets), then
// the CLI gets SIGQUIT.
func (c *Cluster) CLIWatched(ctx context.Context, onStall func(pid int), args ...string) ([]byte, error) {
	argv := append(append(append([]string{}, c.CLIArgs...), "--server", strings.Join(c.APIAddrs(), ",")), args...)
	cmd := exec.CommandContext(ctx, c.Bin.CLI, argv...)
	cmd.Env = os.Environ()
	cmd.Cancel = func() error {
		if onStall != nil {
			onStall(cmd.Process.Pid)
		}
		return cmd.Process.Signal(syscall.SIGQUIT)
	}
	cmd.WaitDelay = 5 * time.Second
	return cmd.CombinedOutput()
}

// emptyDir removes what dir holds but keeps dir, which may be a mount root.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
