package clustertest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/nodeproc"
	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
	"github.com/raftmq/raftmq/recovery"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/transport"
	"github.com/raftmq/raftmq/vfs"
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
	heartbeat time.Duration // raft heartbeat and election timeout
}

// testCluster is three real node processes plus what the test needs to
// reach and hurt them.
type testCluster struct {
	t   testing.TB
	dir string
	c   *nodeproc.Cluster
	lab *netLab // nil: loopback, no network faults

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
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	tc := &testCluster{t: t, dir: dir, conns: map[string]*grpc.ClientConn{}, paused: map[int]bool{}}
	args := []string{"--config", cfgPath}
	if !opts.net {
		c, err := nodeproc.StartCluster(ctx, bin, nodeproc.ClusterOptions{N: 3, Dir: dir, Args: args})
		if err != nil {
			return nil, err
		}
		tc.c = c
		return tc, nil
	}
	lab, err := newNetLab(3)
	if err != nil {
		return nil, fmt.Errorf("network namespaces: %w", err)
	}
	tc.lab = lab
	tc.c = &nodeproc.Cluster{Bin: bin}
	var peers []string
	specs := make([]nodeproc.Spec, 3)
	for i := range specs {
		ip := lab.IP(i)
		id := "n" + strconv.Itoa(i+1)
		specs[i] = nodeproc.Spec{ID: id, Dir: filepath.Join(dir, id), Bootstrap: true, Prefix: lab.Prefix(i), Args: args,
			RaftAddr: net.JoinHostPort(ip, strconv.Itoa(nsRaftPort)), APIAddr: net.JoinHostPort(ip, strconv.Itoa(nsAPIPort)),
			HTTPAddr: net.JoinHostPort(ip, strconv.Itoa(nsHTTPPort))}
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

// close kills every node and removes the namespaces; idempotent.
func (tc *testCluster) close() {
	tc.mu.Lock()
	for _, cc := range tc.conns {
		_ = cc.Close()
	}
	tc.conns = map[string]*grpc.ClientConn{}
	tc.mu.Unlock()
	if tc.c != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		_ = tc.c.Stop(ctx)
		cancel()
	}
	if tc.lab != nil {
		tc.lab.Close()
		tc.lab = nil
	}
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
		cc, err = grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
		if err != nil {
			return nil, err
		}
		tc.conns[addr] = cc
	}
	return pb.NewRaftMQClient(cc), nil
}

// newClient is a leader-following client; seeds start at node first, so
// reads with ReadFromAny go there first.
func (tc *testCluster) newClient(ctx context.Context, first int, readAny bool) (*client.Client, error) {
	addrs := tc.c.APIAddrs()
	seeds := append(addrs[first%len(addrs):], addrs[:first%len(addrs)]...)
	return client.New(ctx, seeds, client.Options{ReadFromAny: readAny})
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
			if m.Suffrage == transport.SuffrageVoter {
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
// and starts it empty with --join through another member.
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
	if err := os.RemoveAll(spec.Dir); err != nil {
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

// dropUnflushed simulates the power loss of node i's machine after a kill
// -9: every commitlog byte from a cut at or beyond the checkpoint's
// confirmOffset, and every consume-queue unit beyond the checkpoint's queue
// table, is zeroed (a never-written page reads as zeros). That drops at
// least what the page cache could have held. Raft's bolt log (fsynced per
// append) is left alone. It returns the number of commitlog bytes dropped.
func dropUnflushed(dataDir string, rng *rand.Rand) (dropped, confirm, cut int64, err error) {
	storeDir := filepath.Join(dataDir, "store")
	ckpt, err := recovery.ReadCheckpoint(vfs.OS(), storeDir)
	switch {
	case errors.Is(err, recovery.ErrNoCheckpoint):
		ckpt = recovery.Checkpoint{}
	case err != nil:
		return 0, 0, 0, err
	}
	confirm, cut = ckpt.ConfirmOffset, ckpt.ConfirmOffset
	if rng.IntN(2) == 0 { // sometimes part of the tail was written back
		cut += rng.Int64N(16 << 10)
	}
	if dropped, err = zeroFrom(filepath.Join(storeDir, "commitlog"), cut); err != nil {
		return 0, 0, 0, err
	}
	queues, err := queueTable(ckpt.Meta)
	if err != nil {
		return 0, 0, 0, err
	}
	topics, err := os.ReadDir(filepath.Join(storeDir, "consumequeue"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, 0, 0, err
	}
	for _, topic := range topics {
		qdirs, err := os.ReadDir(filepath.Join(storeDir, "consumequeue", topic.Name()))
		if err != nil {
			return 0, 0, 0, err
		}
		for _, q := range qdirs {
			next := queues[topic.Name()+"/"+q.Name()]
			if _, err := zeroFrom(filepath.Join(storeDir, "consumequeue", topic.Name(), q.Name()), next*20); err != nil {
				return 0, 0, 0, err
			}
		}
	}
	return dropped, confirm, cut, nil
}

// zeroFrom zeroes every non-zero byte at or beyond absolute offset off in a
// directory of files named by their 20-digit start offset, and returns how
// many bytes it changed.
func zeroFrom(dir string, off int64) (int64, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var names []string
	for _, e := range entries {
		if len(e.Name()) == 20 {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	var changed int64
	for _, name := range names {
		start, err := strconv.ParseInt(name, 10, 64)
		if err != nil {
			continue
		}
		n, err := zeroFileFrom(filepath.Join(dir, name), max(off-start, 0))
		if err != nil {
			return changed, err
		}
		changed += n
	}
	return changed, nil
}

func zeroFileFrom(path string, from int64) (int64, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || from >= fi.Size() {
		return 0, err
	}
	buf := make([]byte, fi.Size()-from)
	if _, err := f.ReadAt(buf, from); err != nil {
		return 0, err
	}
	changed := int64(0)
	for _, b := range buf {
		if b != 0 {
			changed++
		}
	}
	if changed == 0 {
		return 0, nil
	}
	clear(buf)
	if _, err := f.WriteAt(buf, from); err != nil {
		return 0, err
	}
	return changed, f.Sync()
}

// queueTable decodes the queue table of checkpoint meta (FORMAT.md §4):
// "topic/queueId" → next queue offset.
func queueTable(meta []byte) (map[string]int64, error) {
	out := map[string]int64{}
	if len(meta) == 0 {
		return out, nil
	}
	d := metaReader{b: meta}
	if v := d.take(1); v == nil || v[0] != 1 {
		return nil, fmt.Errorf("checkpoint meta: bad version")
	}
	for n := d.u32(); n > 0 && d.err == nil; n-- {
		d.str()
		d.u32()
		d.u32()
	}
	for n := d.u32(); n > 0 && d.err == nil; n-- {
		topic := d.str()
		q := d.u32()
		out[topic+"/"+strconv.FormatUint(uint64(q), 10)] = int64(d.u64())
	}
	return out, d.err
}

type metaReader struct {
	b   []byte
	err error
}

func (d *metaReader) take(n int) []byte {
	if d.err != nil || n > len(d.b) {
		d.err = errors.New("checkpoint meta: short")
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *metaReader) u32() uint32 {
	if v := d.take(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (d *metaReader) u64() uint64 {
	if v := d.take(8); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

func (d *metaReader) str() string {
	v := d.take(2)
	if v == nil {
		return ""
	}
	return string(d.take(int(binary.BigEndian.Uint16(v))))
}
