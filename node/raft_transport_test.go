package node

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/internal/testseed"
)

// The pipeline tests run against RaftTransport. RAFTMQ_TEST_RAFT_PIPELINE=upstream
// runs the same tests against hashicorp/raft's NetworkTransport pipeline
// (MaxRPCsInFlight left at its default), where they fail: that is the bug
// RaftTransport exists for.
func pipelineImpl() string {
	if v := os.Getenv("RAFTMQ_TEST_RAFT_PIPELINE"); v != "" {
		return v
	}
	return "raftmq"
}

func TestRaftTransportPipelineSetting(t *testing.T) {
	cfg := DefaultConfig()
	cfg.RaftAddr = "127.0.0.1:0"
	cfg.Raft.MaxRPCsInFlight = 1
	tr, err := NewRaftTransport(cfg, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	var _ raft.WithClose = tr
	var _ raft.WithPreVote = tr
	p, err := tr.AppendEntriesPipeline("n2", "127.0.0.1:1")
	if p != nil || !errors.Is(err, raft.ErrPipelineReplicationNotSupported) {
		t.Fatalf("max_rpcs_in_flight 1: AppendEntriesPipeline = %v, %v; want ErrPipelineReplicationNotSupported", p, err)
	}

	cfg.Raft.MaxRPCsInFlight = DefaultConfig().Raft.MaxRPCsInFlight
	tr2, err := NewRaftTransport(cfg, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	p, err = tr2.AppendEntriesPipeline("n1", tr.LocalAddr())
	if err != nil {
		t.Fatalf("default max_rpcs_in_flight: AppendEntriesPipeline: %v", err)
	}
	if got := tr2.PipelineStats(tr.LocalAddr()).Opened; got != 1 {
		t.Fatalf("pipelines opened = %d, want 1", got)
	}
	// Close of the transport closes the pipeline; the pipeline's own Close
	// after that is a no-op, and no new one opens.
	if err := tr2.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.AppendEntries(&raft.AppendEntriesRequest{}, new(raft.AppendEntriesResponse)); !errors.Is(err, raft.ErrPipelineShutdown) {
		t.Fatalf("AppendEntries after transport Close = %v, want ErrPipelineShutdown", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := tr2.AppendEntriesPipeline("n1", tr.LocalAddr()); !errors.Is(err, raft.ErrTransportShutdown) {
		t.Fatalf("AppendEntriesPipeline after Close = %v, want ErrTransportShutdown", err)
	}
}

// TestRaftPipelineRecoversFromRejection is the regression test for
// hashicorp/raft #612. A three-node Raft cluster replicates bursts of
// entries with pipelining on; a follower's log store hangs on one StoreLogs
// while the leader fills the pipeline, then fails it, so that follower
// answers Success=false to a pipelined AppendEntries while the leader has
// more sends queued behind it and more entries to send, and rejects the
// pipelined requests already on the wire (their previous entry is missing). With
// NetworkTransport's pipeline, replication to that follower stops for good
// (the send parks on a hand-off nobody takes) and Raft.Shutdown hangs; with
// RaftTransport, Raft falls back to synchronous AppendEntries, the follower
// catches up and pipelining resumes. Several rounds, because with the
// upstream pipeline a round only stalls when Raft's send loop picks one more
// send over the closed finish channel.
func TestRaftPipelineRecoversFromRejection(t *testing.T) {
	rng := rand.New(rand.NewPCG(uint64(testseed.Seed(t)), 11))
	inFlight := 2 + rng.IntN(3)
	c := startPipeCluster(t, rng, func(cfg *Config) { cfg.Raft.MaxRPCsInFlight = inFlight })
	leader, victim := c.leader, c.followers[rng.IntN(len(c.followers))]
	t.Logf("pipeline %s, max_rpcs_in_flight %d, max_append_entries %d, leader %s, victim %s",
		c.impl, inFlight, c.cfg.Raft.MaxAppendEntries, leader.id, victim.id)
	c.payload = make([]byte, 16+rng.IntN(1024))
	if err := c.burst(64)(); err != nil {
		t.Fatal(err)
	}
	c.waitFor("leader pipelines to the victim", func() bool { return leader.trans.PipelineStats(victim.addr).Sent > 0 })
	const rounds = 20
	for round := 1; round <= rounds; round++ {
		roundStart := time.Now()
		before := leader.trans.PipelineStats(victim.addr)
		failedBefore, heldBefore := victim.store.failed.Load(), victim.store.held.Load()
		// The victim's next StoreLogs hangs, then fails: while it hangs the
		// leader fills the pipeline and parks the next send, so the
		// rejection arrives with further sends queued behind it.
		release := victim.store.holdStores(1)
		queued := c.burst(256)
		hang := c.waitFor(fmt.Sprintf("round %d: the victim's StoreLogs hangs", round), func() bool { return victim.store.held.Load() > heldBefore })
		full := c.waitFor(fmt.Sprintf("round %d: the pipeline to the victim is full", round), func() bool { return c.pipelineFull(leader, victim, inFlight) })
		release()
		wait := c.burst(128)
		fail := c.waitFor(fmt.Sprintf("round %d: the victim's StoreLogs fails", round), func() bool { return victim.store.failed.Load() > failedBefore })
		target := leader.raft.LastIndex()
		recovered := c.waitFor(fmt.Sprintf("round %d: the victim catches up to index %d and pipelining resumes", round, target), func() bool {
			s := leader.trans.PipelineStats(victim.addr)
			return victim.raft.LastIndex() >= target && s.Opened > before.Opened && s.Sent > before.Sent
		})
		if err := errors.Join(queued(), wait()); err != nil {
			t.Fatalf("round %d: burst: %v", round, err)
		}
		after := leader.trans.PipelineStats(victim.addr)
		t.Logf("round %d in %v (hang %v, full %v, fail %v, recover %v): %+v", round, time.Since(roundStart).Round(time.Millisecond),
			hang.Round(time.Millisecond), full.Round(time.Millisecond), fail.Round(time.Millisecond), recovered.Round(time.Millisecond), after)
		// The rejection arrived on the pipeline, not on a synchronous RPC.
		if c.impl == "raftmq" && after.Failed <= before.Failed {
			t.Fatalf("round %d: the pipeline saw no failure (%+v → %+v): the rejection did not go through it", round, before, after)
		}
	}
	last := leader.raft.LastIndex()
	c.waitFor(fmt.Sprintf("every node has index %d", last), func() bool {
		for _, n := range c.nodes {
			if n.raft.LastIndex() < last {
				return false
			}
		}
		return true
	})
	c.shutdown()
}

// TestRaftPipelineShutdownWithRPCsInFlight stops a leader whose pipeline to
// a follower is full: the follower's disk hangs in StoreLogs, so requests
// are sent and unanswered, and the next send waits for a slot. Shutdown must
// return promptly, long before the transport timeout would release it.
func TestRaftPipelineShutdownWithRPCsInFlight(t *testing.T) {
	rng := rand.New(rand.NewPCG(uint64(testseed.Seed(t)), 12))
	inFlight := 2 + rng.IntN(4)
	const transportTimeout = 60 * time.Second
	c := startPipeCluster(t, rng, func(cfg *Config) {
		cfg.Raft.MaxRPCsInFlight = inFlight
		cfg.Raft.TransportTimeout = transportTimeout
	})
	leader, victim := c.leader, c.followers[rng.IntN(len(c.followers))]
	t.Logf("pipeline %s, max_rpcs_in_flight %d, leader %s, victim %s", c.impl, inFlight, leader.id, victim.id)
	c.startLoad(rng)
	c.waitFor("leader pipelines to the victim", func() bool { return leader.trans.PipelineStats(victim.addr).Sent > 0 })

	release := victim.store.holdStores(0)
	defer release()
	c.waitFor("the hung follower holds a write", func() bool { return victim.store.held.Load() > 0 })
	c.waitFor(fmt.Sprintf("%d pipelined RPCs in flight to the hung follower and a send waiting", inFlight), func() bool {
		return c.pipelineFull(leader, victim, inFlight)
	})
	c.stopLoad()

	started := time.Now()
	const bound = 5 * time.Second
	if !c.stopNode(leader, bound) {
		c.dumpPipelineStacks()
		t.Fatalf("leader Shutdown with RPCs in flight did not return within %v (transport timeout %v)", bound, transportTimeout)
	}
	t.Logf("leader stopped in %v with %d RPCs in flight", time.Since(started), inFlight)
	release()
	c.shutdown()
}

// faultyLogStore is a real Raft log store whose StoreLogs can be made to
// hang (a disk that stopped answering) and then fail (a disk error).
type faultyLogStore struct {
	RaftStore
	failed atomic.Uint64 // StoreLogs calls failed
	held   atomic.Uint64 // StoreLogs calls that waited on hold
	mu     sync.Mutex
	hold   chan struct{} // non-nil: StoreLogs waits until it is closed
	fails  int           // held StoreLogs calls still to fail once released
}

var errInjectedStore = errors.New("injected StoreLogs failure")

func (s *faultyLogStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs fails only calls that were held: a call already past the hold
// when it was set must not take the failure meant for a held one.
func (s *faultyLogStore) StoreLogs(logs []*raft.Log) error {
	s.mu.Lock()
	h := s.hold
	s.mu.Unlock()
	if h != nil {
		s.held.Add(1)
		<-h
		s.mu.Lock()
		fail := s.fails > 0
		if fail {
			s.fails--
		}
		s.mu.Unlock()
		if fail {
			s.failed.Add(1)
			return errInjectedStore
		}
	}
	return s.RaftStore.StoreLogs(logs)
}

// holdStores makes StoreLogs hang until the returned func (or releaseHold)
// is called; the first fails calls held then fail.
func (s *faultyLogStore) holdStores(fails int) (release func()) {
	s.mu.Lock()
	if s.hold == nil {
		s.hold = make(chan struct{})
	}
	s.fails = fails
	s.mu.Unlock()
	return s.releaseHold
}

func (s *faultyLogStore) releaseHold() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hold != nil {
		close(s.hold)
		s.hold = nil
	}
}

type pipelineTransport interface {
	raft.Transport
	raft.WithClose
	PipelineStats(raft.ServerAddress) PipelineStats
}

type pipeNode struct {
	id    raft.ServerID
	addr  raft.ServerAddress
	raft  *raft.Raft
	trans pipelineTransport
	store *faultyLogStore
	fsm   *countFSM
	// stopped is closed once Shutdown and transport Close have returned.
	stopped chan struct{}
}

type pipeCluster struct {
	t         *testing.T
	impl      string
	cfg       Config
	nodes     []*pipeNode
	leader    *pipeNode
	followers []*pipeNode

	payload  []byte
	loadStop chan struct{}
	loadDone chan struct{}
	loadErr  error
}

// startPipeCluster starts three bare Raft nodes (counting FSM, raft-boltdb
// in a temp dir, TCP on loopback) and waits for a leader.
func startPipeCluster(t *testing.T, rng *rand.Rand, tune func(*Config)) *pipeCluster {
	t.Helper()
	c := &pipeCluster{t: t, impl: pipelineImpl()}
	cfg := DefaultConfig()
	cfg.RaftAddr = "127.0.0.1:0"
	cfg.Raft.HeartbeatTimeout, cfg.Raft.ElectionTimeout, cfg.Raft.LeaderLeaseTimeout = time.Second, time.Second, 500*time.Millisecond
	cfg.Raft.CommitTimeout = 5 * time.Millisecond
	cfg.Raft.MaxAppendEntries = 4 + rng.IntN(60) // many RPCs per burst
	cfg.Raft.SnapshotInterval, cfg.Raft.SnapshotThreshold = time.Hour, 1<<40
	cfg.Raft.TransportTimeout = 10 * time.Second
	tune(&cfg)
	c.cfg = cfg
	logger := hclog.New(&hclog.LoggerOptions{Output: testWriter{t}, Level: hclog.Warn})

	var servers []raft.Server
	for i := 0; i < 3; i++ {
		n := &pipeNode{id: raft.ServerID(fmt.Sprintf("p%d", i+1)), fsm: new(countFSM)}
		var err error
		switch c.impl {
		case "raftmq":
			n.trans, err = NewRaftTransport(cfg, logger.Named(string(n.id)))
		case "upstream":
			n.trans, err = newUpstreamTransport(cfg, logger.Named(string(n.id)))
		default:
			t.Fatalf("RAFTMQ_TEST_RAFT_PIPELINE=%q: want raftmq or upstream", c.impl)
		}
		if err != nil {
			t.Fatal(err)
		}
		n.addr = n.trans.LocalAddr()
		c.nodes = append(c.nodes, n)
		servers = append(servers, raft.Server{ID: n.id, Address: n.addr})
	}
	t.Cleanup(c.shutdown)
	for _, n := range c.nodes {
		dir := t.TempDir()
		st, err := OpenRaftStore(LogStoreBolt, dir, logger)
		if err != nil {
			t.Fatal(err)
		}
		n.store = &faultyLogStore{RaftStore: st}
		snaps, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(dir, "snapshots"), 1, logger)
		if err != nil {
			t.Fatal(err)
		}
		ncfg := cfg
		ncfg.ID = string(n.id)
		if n.raft, err = raft.NewRaft(BuildRaftConfig(ncfg, logger.Named(string(n.id))), n.fsm, n.store, n.store, snaps, n.trans); err != nil {
			t.Fatal(err)
		}
		if err := n.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
			t.Fatal(err)
		}
	}
	c.waitFor("a leader every node follows", func() bool {
		var leader *pipeNode
		for _, n := range c.nodes {
			if n.raft.State() == raft.Leader {
				leader = n
			}
		}
		if leader == nil {
			return false
		}
		for _, n := range c.nodes {
			if addr, _ := n.raft.LeaderWithID(); addr != leader.addr {
				return false
			}
		}
		c.leader = leader
		return true
	})
	for _, n := range c.nodes {
		if n != c.leader {
			c.followers = append(c.followers, n)
		}
	}
	return c
}

// waitFor polls cond until it holds, failing the test after 20 s, and
// returns how long that took.
func (c *pipeCluster) waitFor(what string, cond func() bool) time.Duration {
	c.t.Helper()
	const limit = 20 * time.Second
	start := time.Now()
	deadline := start.Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			c.dumpPipelineStacks()
			var b strings.Builder
			for _, n := range c.nodes {
				fmt.Fprintf(&b, " %s: %v last index %d;", n.id, n.raft.State(), n.raft.LastIndex())
				if n == c.leader {
					for _, f := range c.followers {
						fmt.Fprintf(&b, " pipeline to %s %+v;", f.id, n.trans.PipelineStats(f.addr))
					}
				}
			}
			c.t.Fatalf("not within %v: %s (%s)", limit, what, b.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
	return time.Since(start)
}

// startLoad applies entries on the leader at a steady pace (about 4,000 a
// second, well within what even synchronous replication to a follower
// sustains, so a follower that fell back to it catches up), up to 256 at
// once.
func (c *pipeCluster) startLoad(rng *rand.Rand) {
	c.loadStop, c.loadDone = make(chan struct{}), make(chan struct{})
	c.payload = make([]byte, 16+rng.IntN(1024))
	go func() {
		defer close(c.loadDone)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		var window []raft.ApplyFuture
		for {
			select {
			case <-c.loadStop:
				for _, f := range window {
					_ = f.Error()
				}
				return
			case <-tick.C:
			}
			for i := 0; i < 4; i++ {
				window = append(window, c.leader.raft.Apply(c.payload, 0))
			}
			for len(window) >= 256 {
				if err := window[0].Error(); err != nil {
					c.loadErr = fmt.Errorf("apply on leader: %w", err)
					for _, f := range window[1:] {
						_ = f.Error()
					}
					return
				}
				window = window[1:]
			}
		}
	}()
}

// burst applies n entries at once and returns a func that waits for them:
// the leader's replication loop then has a send ready the moment a
// pipelined answer arrives.
func (c *pipeCluster) burst(n int) (wait func() error) {
	fs := make([]raft.ApplyFuture, n)
	for i := range fs {
		fs[i] = c.leader.raft.Apply(c.payload, 0)
	}
	return func() error {
		var errs []error
		for _, f := range fs {
			errs = append(errs, f.Error())
		}
		return errors.Join(errs...)
	}
}

func (c *pipeCluster) stopLoad() {
	c.t.Helper()
	if c.loadStop == nil {
		return
	}
	close(c.loadStop)
	<-c.loadDone
	c.loadStop = nil
	if c.loadErr != nil {
		c.t.Fatal(c.loadErr)
	}
}

// stopNode shuts Raft down and closes the transport as Node.Close does,
// reporting whether that finished within bound (it keeps going if not).
func (c *pipeCluster) stopNode(n *pipeNode, bound time.Duration) bool {
	if n.stopped == nil {
		n.stopped = make(chan struct{})
		go func() {
			defer close(n.stopped)
			if n.raft == nil {
				_ = n.trans.Close()
				return
			}
			f := n.raft.Shutdown()
			_ = n.trans.Close()
			_ = f.Error()
			if n.store != nil {
				_ = n.store.Close()
			}
		}()
	}
	select {
	case <-n.stopped:
		return true
	case <-time.After(bound):
		return false
	}
}

// shutdown stops every node; a node that does not stop within 10 s fails
// the test. Then, so that the process can go on, a stalled upstream
// pipeline is released and hung stores are let go.
func (c *pipeCluster) shutdown() {
	for _, n := range c.nodes {
		if n.store != nil {
			n.store.releaseHold() // a test that failed may leave a disk hung
		}
	}
	if c.loadStop != nil {
		close(c.loadStop)
		<-c.loadDone
		c.loadStop = nil
	}
	for _, n := range c.nodes {
		if c.stopNode(n, 10*time.Second) {
			continue
		}
		c.dumpPipelineStacks()
		c.t.Errorf("raft Shutdown of %s did not return within 10s", n.id)
		if u, ok := n.trans.(*upstreamTransport); ok {
			u.unstick()
		}
		if !c.stopNode(n, time.Minute) {
			c.t.Errorf("raft Shutdown of %s still hung after releasing it", n.id)
		}
	}
	for _, n := range c.nodes {
		if u, ok := n.trans.(*upstreamTransport); ok {
			u.stopUnstick()
		}
	}
}

// pipelineFull reports whether from's pipeline to to has n RPCs in flight
// and one more send in progress, waiting for a slot or in its write
// (upstream: a send in progress, as it does not tell how many are in flight).
func (c *pipeCluster) pipelineFull(from, to *pipeNode, n int) bool {
	s := from.trans.PipelineStats(to.addr)
	if c.impl == "upstream" {
		return s.Pending > 0
	}
	return s.InFlight == uint64(n) && s.Pending > 0
}

func (c *pipeCluster) dumpPipelineStacks() {
	buf := make([]byte, 4<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "raft") && !strings.Contains(g, "handleConn") {
			c.t.Log(g)
		}
	}
}

type countFSM struct{ applied atomic.Uint64 }

func (f *countFSM) Apply(l *raft.Log) interface{} {
	f.applied.Store(l.Index)
	return nil
}

func (f *countFSM) Snapshot() (raft.FSMSnapshot, error) { return emptySnapshot{}, nil }
func (f *countFSM) Restore(rc io.ReadCloser) error      { return rc.Close() }

type emptySnapshot struct{}

func (emptySnapshot) Persist(sink raft.SnapshotSink) error { return sink.Close() }
func (emptySnapshot) Release()                             {}

// upstreamTransport is hashicorp/raft's NetworkTransport with its own
// pipeline (MaxRPCsInFlight at its default), counting pipelined sends. After
// a test has seen it stall, unstick reads the stalled pipelines' Consumer so
// that Raft can shut down and the test leaks no goroutine.
type upstreamTransport struct {
	*raft.NetworkTransport
	mu     sync.Mutex
	stats  map[raft.ServerAddress]*pipelineCounters
	pipes  []raft.AppendPipeline
	stop   chan struct{}
	drains sync.WaitGroup
}

func newUpstreamTransport(cfg Config, logger hclog.Logger) (*upstreamTransport, error) {
	nt, err := raft.NewTCPTransportWithConfig(cfg.RaftAddr, nil, &raft.NetworkTransportConfig{
		MaxPool: cfg.Raft.MaxPool, Timeout: cfg.Raft.TransportTimeout, Logger: logger,
	})
	if err != nil {
		return nil, err
	}
	return &upstreamTransport{NetworkTransport: nt, stats: make(map[raft.ServerAddress]*pipelineCounters), stop: make(chan struct{})}, nil
}

func (u *upstreamTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := u.NetworkTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	c := u.stats[target]
	if c == nil {
		c = new(pipelineCounters)
		u.stats[target] = c
	}
	c.opened.Add(1)
	u.pipes = append(u.pipes, p)
	return countingPipeline{AppendPipeline: p, c: c}, nil
}

func (u *upstreamTransport) PipelineStats(target raft.ServerAddress) PipelineStats {
	u.mu.Lock()
	defer u.mu.Unlock()
	c := u.stats[target]
	if c == nil {
		return PipelineStats{}
	}
	return PipelineStats{Opened: c.opened.Load(), Sent: c.sent.Load(), Pending: uint64(c.pending.Load())}
}

func (u *upstreamTransport) unstick() {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, p := range u.pipes {
		u.drains.Add(1)
		go func(ch <-chan raft.AppendFuture) {
			defer u.drains.Done()
			for {
				select {
				case <-ch:
				case <-u.stop:
					return
				}
			}
		}(p.Consumer())
	}
	u.pipes = nil
}

func (u *upstreamTransport) stopUnstick() {
	u.mu.Lock()
	select {
	case <-u.stop:
	default:
		close(u.stop)
	}
	u.mu.Unlock()
	u.drains.Wait()
}

type countingPipeline struct {
	raft.AppendPipeline
	c *pipelineCounters
}

func (p countingPipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	p.c.pending.Add(1)
	f, err := p.AppendPipeline.AppendEntries(args, resp)
	p.c.pending.Add(-1)
	if err == nil {
		p.c.sent.Add(1)
	}
	return f, err
}
