package node

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// TestReplicateWhileStoring: with Config.ReplicateWhileStoring (the fork's
// patch 9) the leader's replicators send a new entry while the leader
// writes it to its own log, so a follower holds it before that write
// returns; without it (v1.8.0) the followers get it only after. The
// leader's log store here holds each client entry until a follower has it
// (or 300 ms passed) and records which happened.
func TestReplicateWhileStoring(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("on=%v", on), func(t *testing.T) {
			c := startGatedCluster(t, on)
			leader := c.leader(t)
			leader.store.gate.Store(gateWait)
			if err := leader.raft.Apply([]byte("x"), 5*time.Second).Error(); err != nil {
				t.Fatal(err)
			}
			leader.store.gate.Store(gateOff)
			if got := leader.store.followerHadIt.Load(); got != on {
				t.Fatalf("a follower held the entry before the leader's own write returned: %v, want %v", got, on)
			}
			c.awaitSameLogs(t, "x")
			c.checkStoresWhole(t)
		})
	}
}

// TestReplicateWhileStoringFailedWrite: when the leader's own write fails
// after its replicators sent the entry, the leader answers the proposal
// with the error and steps down, and takes the entry back out of its cache
// and last log. The followers may commit it (its fate was unknown to the
// client); either way every replica ends with the same entries, and the
// cluster takes new ones.
func TestReplicateWhileStoringFailedWrite(t *testing.T) {
	c := startGatedCluster(t, true)
	leader := c.leader(t)
	leader.store.gate.Store(gateFail)
	err := leader.raft.Apply([]byte("x"), 5*time.Second).Error()
	if err == nil || !strings.Contains(err.Error(), errInjectedWrite.Error()) { // LogCache quotes the store's error
		t.Fatalf("Apply on a leader whose write failed: %v, want the injected write error", err)
	}
	if !leader.store.followerHadIt.Load() {
		t.Fatal("no follower held the entry before the leader's write failed: the fault did not happen as staged")
	}
	if got := leader.store.gate.Load(); got != gateOff {
		t.Fatalf("the injected failure was not consumed (gate %d)", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		l := c.leader(t)
		err := l.raft.Apply([]byte("y"), time.Second).Error()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no write succeeded within 10 s after the failed one: %v", err)
		}
	}
	c.awaitSameLogs(t, "y")
	c.checkStoresWhole(t)
}

// TestRemovalCommitsInNewConfiguration: a configuration entry commits on a
// quorum of the configuration it sets. The leader removes follower x while
// the other follower, y, is cut off, and its own write of the entry waits
// until x holds it; x's answer then reaches the leader before its own write
// returns (patch 9). hashicorp/raft v1.8.0 switched the commitment to the new
// configuration only after the dispatch, so x's answer counted in the old one
// and the removal committed on the leader and x alone: a voter left holding
// none of it (raftmq's chaos suite lost acknowledged messages that way once x
// was wiped and the leader killed). The fork (patch 10) switches first: the
// removal must wait for y.
func TestRemovalCommitsInNewConfiguration(t *testing.T) {
	// The leader must keep its lease while y is cut off: from the removal
	// on, y is the only other voter.
	c := startGatedCluster(t, true, func(conf *raft.Config) {
		conf.HeartbeatTimeout, conf.ElectionTimeout, conf.LeaderLeaseTimeout = 2*time.Second, 2*time.Second, 2*time.Second
	})
	leader := c.leader(t)
	var x, y *gatedNode
	for _, n := range c.nodes {
		switch {
		case n == leader:
		case x == nil:
			x = n
		default:
			y = n
		}
	}
	leader.trans.Disconnect(y.addr)
	y.trans.Disconnect(leader.addr)
	leader.store.configWaitFor.Store(x.store.InmemStore)
	f := leader.raft.RemoveServer(x.id, 0, 0)
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("the removal of %s committed while %s, the one voter left beside the leader, was cut off: it committed in the old configuration", x.id, y.id)
		}
		t.Fatalf("the removal of %s ended with %v while %s was cut off", x.id, err, y.id)
	case <-time.After(500 * time.Millisecond):
	}
	if !leader.store.configSeen.Load() {
		t.Fatalf("%s did not hold the configuration entry before the leader's own write returned: the race was not staged", x.id)
	}
	leader.trans.Connect(y.addr, y.trans)
	y.trans.Connect(leader.addr, leader.trans)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("removal of %s once %s was back: %v", x.id, y.id, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the removal of %s did not commit within 10 s of %s coming back", x.id, y.id)
	}
	if last, _ := y.store.LastIndex(); last < f.Index() {
		t.Fatalf("the removal committed at index %d while %s holds the log up to %d", f.Index(), y.id, last)
	}
}

var errInjectedWrite = errors.New("injected log write failure")

// What a gatedStore does with the next client entry it is given.
const (
	gateOff  int32 = iota // store it
	gateWait              // wait until a follower has it (at most 300 ms), then store it
	gateFail              // wait until a follower has it (at most 300 ms), then fail, once
)

// gatedStore is a node's log store in startGatedCluster.
type gatedStore struct {
	*raft.InmemStore
	gate          atomic.Int32
	followerHadIt atomic.Bool
	peers         func() []*raft.InmemStore // the other nodes' stores
	// configWaitFor, when set, holds configuration entries until that
	// store has them (at most 1 s); configSeen records that it did.
	configWaitFor atomic.Pointer[raft.InmemStore]
	configSeen    atomic.Bool
}

func (g *gatedStore) StoreLogs(logs []*raft.Log) error {
	mode := g.gate.Load()
	last := logs[len(logs)-1]
	if w := g.configWaitFor.Load(); w != nil && last.Type == raft.LogConfiguration {
		deadline := time.Now().Add(time.Second)
		for got, _ := w.LastIndex(); got < last.Index && time.Now().Before(deadline); got, _ = w.LastIndex() {
			time.Sleep(time.Millisecond)
		}
		got, _ := w.LastIndex()
		g.configSeen.Store(got >= last.Index)
	}
	if mode == gateOff || last.Type != raft.LogCommand {
		return g.InmemStore.StoreLogs(logs)
	}
	g.followerHadIt.Store(g.awaitFollower(last.Index, 300*time.Millisecond))
	if mode == gateFail && g.gate.CompareAndSwap(gateFail, gateOff) {
		return errInjectedWrite
	}
	return g.InmemStore.StoreLogs(logs)
}

// awaitFollower reports whether another node's store held index within d.
func (g *gatedStore) awaitFollower(index uint64, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		for _, p := range g.peers() {
			if last, _ := p.LastIndex(); last >= index {
				return true
			}
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

type gatedNode struct {
	raft  *raft.Raft
	store *gatedStore
	fsm   *raft.MockFSM
	id    raft.ServerID
	addr  raft.ServerAddress
	trans *raft.InmemTransport
}

type gatedCluster struct{ nodes []*gatedNode }

// startGatedCluster starts three voters over the in-memory transport, each
// with its log behind a raft.LogCache as the node's is, and waits for a
// leader.
func startGatedCluster(t *testing.T, replicateWhileStoring bool, tune ...func(*raft.Config)) *gatedCluster {
	t.Helper()
	const n = 3
	c := &gatedCluster{}
	inner := make([]*raft.InmemStore, n)
	addrs := make([]raft.ServerAddress, n)
	transports := make([]*raft.InmemTransport, n)
	for i := range n {
		addrs[i], transports[i] = raft.NewInmemTransport("")
		inner[i] = raft.NewInmemStore()
	}
	for i := range n {
		for j := range n {
			if i != j {
				transports[i].Connect(addrs[j], transports[j])
			}
		}
	}
	var servers []raft.Server
	for i := range n {
		servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(fmt.Sprint("n", i)), Address: addrs[i]})
	}
	for i := range n {
		st := &gatedStore{InmemStore: inner[i], peers: func() []*raft.InmemStore {
			var p []*raft.InmemStore
			for j, s := range inner {
				if j != i {
					p = append(p, s)
				}
			}
			return p
		}}
		conf := raft.DefaultConfig()
		conf.LocalID = servers[i].ID
		conf.Logger = hclog.NewNullLogger()
		conf.HeartbeatTimeout, conf.ElectionTimeout, conf.LeaderLeaseTimeout = 100*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond
		conf.CommitTimeout = 5 * time.Millisecond
		conf.ReplicateWhileStoring = replicateWhileStoring
		for _, f := range tune {
			f(conf)
		}
		logs, err := raft.NewLogCache(64, st)
		if err != nil {
			t.Fatal(err)
		}
		fsm := &raft.MockFSM{}
		r, err := raft.NewRaft(conf, fsm, logs, st, raft.NewInmemSnapshotStore(), transports[i])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := r.Shutdown().Error(); err != nil {
				t.Error(err)
			}
		})
		if i == 0 {
			if err := r.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
				t.Fatal(err)
			}
		}
		c.nodes = append(c.nodes, &gatedNode{raft: r, store: st, fsm: fsm, id: servers[i].ID, addr: addrs[i], trans: transports[i]})
	}
	c.leader(t)
	return c
}

// leader waits (at most 10 s) for a node that leads.
func (c *gatedCluster) leader(t *testing.T) *gatedNode {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, n := range c.nodes {
			if n.raft.State() == raft.Leader {
				return n
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no leader within 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// awaitSameLogs waits (at most 10 s) until every node's FSM applied the
// same entries, the last of them last.
func (c *gatedCluster) awaitSameLogs(t *testing.T, last string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		first := c.nodes[0].fsm.Logs()
		same := len(first) > 0 && string(first[len(first)-1]) == last
		for _, n := range c.nodes[1:] {
			logs := n.fsm.Logs()
			if len(logs) != len(first) {
				same = false
				break
			}
			for i := range logs {
				same = same && bytes.Equal(logs[i], first[i])
			}
		}
		if same {
			return
		}
		if time.Now().After(deadline) {
			for i, n := range c.nodes {
				t.Logf("node %d applied %q", i, n.fsm.Logs())
			}
			t.Fatalf("the replicas did not apply the same entries ending in %q within 10 s", last)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkStoresWhole fails unless every node's log store holds each entry
// from its first index to its last, the same as the other nodes hold at
// that index: an entry a node only had in its cache, or a gap, fails it.
func (c *gatedCluster) checkStoresWhole(t *testing.T) {
	t.Helper()
	held := map[uint64]raft.Log{}
	for i, n := range c.nodes {
		first, _ := n.store.FirstIndex()
		last, _ := n.store.LastIndex()
		for idx := first; idx <= last && idx > 0; idx++ {
			var l raft.Log
			if err := n.store.GetLog(idx, &l); err != nil {
				t.Fatalf("node %d's log store lacks entry %d of %d-%d: %v", i, idx, first, last, err)
			}
			if o, ok := held[idx]; ok && (o.Term != l.Term || !bytes.Equal(o.Data, l.Data)) {
				t.Fatalf("node %d's entry %d (term %d, %q) differs from another node's (term %d, %q)", i, idx, l.Term, l.Data, o.Term, o.Data)
			}
			held[idx] = l
		}
	}
}
