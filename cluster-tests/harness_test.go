package clustertest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/nodeproc"
	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/wire"
)

// nodeConfig is the TOML every node runs with: small segments so rolls,
// snapshots and log compaction happen within a short run, and Raft timeouts
// sized for a loaded two-core machine.
const nodeConfig = `log_level = "info"
apply_timeout = "5s"
catch_up_timeout = "40s"
shutdown_grace = "3s"
[raft]
heartbeat_timeout = "%[1]s"
election_timeout = "%[1]s"
leader_lease_timeout = "%[2]s"
commit_timeout = "5ms"
snapshot_interval = "2s"
snapshot_threshold = 512
trailing_logs = 256
[store]
CommitLogFileSize = 1048576
ConsumeQueueFileSize = 20000
IndexMaxHashSlots = 4096
IndexMaxIndexes = 16384
MaxMessageSize = 65536
FlushInterval = "1s"
PreTouch = false
# no disk-ratio retention: every acknowledged message must stay readable
DiskMaxUsedSpaceRatio = 100
CleanForciblyRatio = 100
DiskWarningRatio = 100
`

// raftLogStore overrides the nodes' Raft log store (node default if empty).
var raftLogStore = flag.String("raft.logstore", "", `Raft log store of every node: "boltdb" or "wal" (empty: the node's default)`)

// harnessStoreConfig is nodeConfig's [store] for a store opened offline.
func harnessStoreConfig(dir string) store.Config {
	c := store.DefaultConfig(dir)
	c.CommitLogFileSize, c.ConsumeQueueFileSize = 1048576, 20000
	c.IndexMaxHashSlots, c.IndexMaxIndexes, c.MaxMessageSize = 4096, 16384, 65536
	c.UseAllocator, c.PreTouch = false, false
	return c
}

// clusterOptions choose how a test cluster runs.
type clusterOptions struct {
	net       bool          // nodes in network namespaces (root only)
	lossy     bool          // every data dir on its own lossyfs mount (root, /dev/fuse)
	heartbeat time.Duration // raft heartbeat and election timeout
	// secure: TLS on every listener, mutual TLS between nodes, and
	// authentication (clusterSecurity); the harness dials with the CA and
	// an admin token.
	secure bool
}

// testCluster is three real node processes plus what the test needs to
// reach and hurt them.
type testCluster struct {
	t   testing.TB
	dir string
	c   *nodeproc.Cluster
	lab *netLab // nil: loopback, no network faults
	// mounts[i] is node i's lossyfs (its data dir); nil without opts.lossy.
	mounts []*lossyMount
	// sec is the TLS and auth material of a secure cluster; nil: plain.
	sec *clusterSecurity

	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn
	paused map[int]bool
}

// startTestCluster starts three nodes under dir. With opts.net the caller
// has checked netAvailable.
func startTestCluster(ctx context.Context, t testing.TB, dir string, opts clusterOptions) (*testCluster, error) {
	bin, err := nodeproc.Build()
	if err != nil {
		return nil, err
	}
	if opts.heartbeat == 0 {
		opts.heartbeat = 500 * time.Millisecond
	}
	cfgPath := filepath.Join(dir, "raftmq.toml")
	cfg := fmt.Sprintf(nodeConfig, opts.heartbeat, opts.heartbeat/2)
	if *raftLogStore != "" {
		cfg = strings.Replace(cfg, "[raft]\n", fmt.Sprintf("[raft]\nlog_store = %q\n", *raftLogStore), 1)
	}
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	tc := &testCluster{t: t, dir: dir, conns: map[string]*grpc.ClientConn{}, paused: map[int]bool{}}
	if opts.lossy {
		mounts, err := startLossyMounts(ctx, bin, dir, 3)
		if err != nil {
			return nil, fmt.Errorf("lossyfs: %w", err)
		}
		tc.mounts = mounts
	}
	args := []string{"--config", cfgPath}
	if !opts.net {
		co := nodeproc.ClusterOptions{N: 3, Dir: dir, Args: args}
		if opts.secure {
			if err := tc.makeSecure(dir, []string{"127.0.0.1", "127.0.0.1", "127.0.0.1"}); err != nil {
				tc.close()
				return nil, err
			}
			co.ArgsFor, co.HTTPTLS, co.CLIArgs = tc.sec.argsFor, tc.sec.tls, tc.sec.cliArgs()
		}
		c, err := nodeproc.StartCluster(ctx, bin, co)
		if err != nil {
			tc.close()
			return nil, err
		}
		tc.c = c
		return tc, nil
	}
	lab, err := newNetLab(3)
	if err != nil {
		tc.close()
		return nil, fmt.Errorf("network namespaces: %w", err)
	}
	tc.lab = lab
	tc.c = &nodeproc.Cluster{Bin: bin}
	if opts.secure {
		if err := tc.makeSecure(dir, []string{lab.IP(0), lab.IP(1), lab.IP(2)}); err != nil {
			tc.close()
			return nil, err
		}
		tc.c.CLIArgs = tc.sec.cliArgs()
	}
	var peers []string
	specs := make([]nodeproc.Spec, 3)
	for i := range specs {
		ip := lab.IP(i)
		id := "n" + strconv.Itoa(i+1)
		specs[i] = nodeproc.Spec{ID: id, Dir: filepath.Join(dir, id), Bootstrap: true, Prefix: lab.Prefix(i), Args: args,
			RaftAddr: net.JoinHostPort(ip, strconv.Itoa(nsRaftPort)), APIAddr: net.JoinHostPort(ip, strconv.Itoa(nsAPIPort)),
			HTTPAddr: net.JoinHostPort(ip, strconv.Itoa(nsHTTPPort))}
		if tc.mounts != nil {
			specs[i].OnSlowKill = tc.mounts[i].dumpGoroutines
		}
		if tc.sec != nil {
			specs[i].Args = append(append([]string{}, args...), tc.sec.argsFor(i)...)
			specs[i].HTTPTLS = tc.sec.tls
		}
		peers = append(peers, id+"="+specs[i].RaftAddr)
	}
	for i := range specs {
		specs[i].Peers = strings.Join(peers, ",")
		p, err := nodeproc.Start(bin, specs[i])
		if err != nil {
			tc.close()
			return nil, err
		}
		tc.c.Nodes = append(tc.c.Nodes, p)
	}
	if err := tc.c.WaitHealthy(ctx); err != nil {
		tc.close()
		return nil, err
	}
	if _, err := tc.c.Leader(ctx); err != nil {
		tc.close()
		return nil, err
	}
	return tc, nil
}

// makeSecure makes the cluster's TLS and auth material in dir/pki (not in
// a node's data dir: see clusterSecurity); ips[i] is node i's address.
func (tc *testCluster) makeSecure(dir string, ips []string) error {
	sec, err := newClusterSecurity(filepath.Join(dir, "pki"), ips)
	if err != nil {
		return fmt.Errorf("TLS and auth material: %w", err)
	}
	tc.sec = sec
	tc.t.Logf("secure cluster: TLS on every port, mutual TLS between nodes, auth file %s (CA, certificates and harness token in %s)", sec.authFile, sec.dir)
	return nil
}

// close kills every node and removes the namespaces; idempotent.
func (tc *testCluster) close() {
	tc.mu.Lock()
	for _, cc := range tc.conns {
		_ = cc.Close()
	}
	tc.conns = map[string]*grpc.ClientConn{}
	tc.mu.Unlock()
	if tc.sec != nil {
		tc.sec.http.CloseIdleConnections()
	}
	if tc.c != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		_ = tc.c.Stop(ctx)
		cancel()
	}
	if tc.lab != nil {
		tc.lab.Close()
		tc.lab = nil
	}
	for _, m := range tc.mounts {
		m.stop()
	}
	tc.mounts = nil
}

func (tc *testCluster) node(i int) *nodeproc.Proc { return tc.c.Nodes[i] }
func (tc *testCluster) id(i int) string           { return tc.node(i).Spec().ID }

// direct returns a gRPC stub bound to node i only (no leader following).
func (tc *testCluster) direct(i int) (pb.RaftMQClient, error) {
	addr := tc.node(i).Spec().APIAddr
	tc.mu.Lock()
	defer tc.mu.Unlock()
	cc, ok := tc.conns[addr]
	if !ok {
		var err error
		cc, err = grpc.NewClient(addr, append(tc.dialOptions(),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))...)
		if err != nil {
			return nil, err
		}
		tc.conns[addr] = cc
	}
	return pb.NewRaftMQClient(cc), nil
}

// mustStartCluster starts a test cluster in a fresh directory named for
// the test, closed when the test ends; it fails the test if it cannot.
func mustStartCluster(t *testing.T, name string, opts clusterOptions) *testCluster {
	t.Helper()
	tc, err := startTestCluster(context.Background(), t, nodeproc.TempDir(t, name), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.close)
	return tc
}

// mustClient is newClient (leader reads, starting at member first), closed
// when the test ends; it fails the test if it cannot connect.
func (tc *testCluster) mustClient(t *testing.T, first int) *client.Client {
	t.Helper()
	cl, err := tc.newClient(context.Background(), first, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// newClient is a leader-following client; seeds start at node first, so
// reads with ReadFromAny go there first.
func (tc *testCluster) newClient(ctx context.Context, first int, readAny bool) (*client.Client, error) {
	addrs := tc.c.APIAddrs()
	seeds := append(addrs[first%len(addrs):], addrs[:first%len(addrs)]...)
	return client.New(ctx, seeds, tc.clientOptions(readAny))
}

// leader waits (bounded by d) for an agreed leader.
func (tc *testCluster) leader(ctx context.Context, d time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return tc.c.Leader(ctx)
}

// waitServing waits until every node runs, is healthy and a leader is agreed.
func (tc *testCluster) waitServing(ctx context.Context, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for i, p := range tc.c.Nodes {
		if !p.Running() {
			return fmt.Errorf("node %s is not running", tc.id(i))
		}
	}
	if err := tc.c.WaitHealthy(ctx); err != nil {
		return err
	}
	_, err := tc.c.Leader(ctx)
	return err
}

// follower returns a random node that is not the leader.
func (tc *testCluster) follower(ctx context.Context, rng *rand.Rand) (int, error) {
	l, err := tc.leader(ctx, 20*time.Second)
	if err != nil {
		return -1, err
	}
	return (l + 1 + rng.IntN(len(tc.c.Nodes)-1)) % len(tc.c.Nodes), nil
}

// restart starts node i again after it exited.
func (tc *testCluster) restart(i int) error { return tc.node(i).Restart() }

// healAll undoes every fault: network rules, pauses, dead nodes.
func (tc *testCluster) healAll() error {
	var errs []error
	if tc.lab != nil {
		errs = append(errs, tc.lab.heal())
	}
	for i, p := range tc.c.Nodes {
		if p.Running() {
			errs = append(errs, p.Resume())
			continue
		}
		errs = append(errs, tc.restart(i))
	}
	tc.mu.Lock()
	tc.paused = map[int]bool{}
	tc.mu.Unlock()
	return errors.Join(errs...)
}

// converged waits until every node reports the same applied index, confirm
// offset and max offset, three voters, and the same leader, twice in a row.
func (tc *testCluster) converged(ctx context.Context, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	prev, why := "", ""
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		state, err := tc.sameState(ctx)
		if err != nil {
			if ctx.Err() == nil {
				why = err.Error()
			}
		} else if state == prev {
			return nil
		}
		prev = state
		select {
		case <-ctx.Done():
			return fmt.Errorf("nodes did not converge within %v: %s", d, why)
		case <-tick.C:
		}
	}
}

// sameState returns a string naming the state all nodes agree on, or why
// they do not.
func (tc *testCluster) sameState(ctx context.Context) (string, error) {
	var first string
	for i, p := range tc.c.Nodes {
		s, err := p.Status(ctx)
		if err != nil {
			return "", err
		}
		voters := 0
		for _, m := range s.Members {
			if m.Suffrage == wire.SuffrageVoter {
				voters++
			}
		}
		st := fmt.Sprintf("leader=%s applied=%d confirm=%d max=%d voters=%d", s.LeaderID, s.AppliedIndex, s.ConfirmOffset, s.MaxOffset, voters)
		if voters != len(tc.c.Nodes) || s.LeaderID == "" {
			return "", fmt.Errorf("node %s: %s", tc.id(i), st)
		}
		if i == 0 {
			first = st
		} else if st != first {
			return "", fmt.Errorf("node %s: %s, node %s: %s", tc.id(0), first, tc.id(i), st)
		}
	}
	return first, nil
}

// rejoinWiped removes node i from the cluster, kills it, wipes its data dir
// and starts it empty with --join through another member. The new process
// keeps the spec's flags, so a secure cluster's member re-joins with the
// same certificate and auth file (in dir/pki, which the wipe leaves alone).
func (tc *testCluster) rejoinWiped(ctx context.Context, cl *client.Client, i int) error {
	id := tc.id(i)
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	err := tc.remove(rctx, cl, id)
	cancel()
	if err != nil {
		return fmt.Errorf("remove %s: %w", id, err)
	}
	if err := tc.node(i).Kill(); err != nil {
		return err
	}
	spec := tc.node(i).Spec()
	if err := emptyDir(spec.Dir); err != nil {
		return err
	}
	other := (i + 1) % len(tc.c.Nodes)
	spec.Bootstrap, spec.Peers, spec.Join = false, "", tc.node(other).Spec().APIAddr
	p, err := nodeproc.Start(tc.c.Bin, spec)
	if err != nil {
		return err
	}
	tc.c.Nodes[i] = p
	return nil
}

// remove takes member id out of the configuration. A Remove whose outcome
// is unknown (the leader lost leadership while committing it, a normal
// outcome under load) is asked again: a member already removed answers
// ErrNotFound, which then means done. Bounded by ctx.
func (tc *testCluster) remove(ctx context.Context, cl *client.Client, id string) error {
	err := cl.Remove(ctx, id)
	for tries := 1; client.IsOutcomeUnknown(err); tries++ {
		tc.t.Logf("remove %s: %v; asking again", id, err)
		pace := time.NewTimer(100 * time.Millisecond) // retry pacing, not a condition
		select {
		case <-ctx.Done():
			pace.Stop()
			return fmt.Errorf("outcome still unknown after %d tries: %w", tries, err)
		case <-pace.C:
		}
		err = cl.Remove(ctx, id)
		if errors.Is(err, client.ErrNotFound) {
			return nil // the earlier try was applied
		}
	}
	return err
}
