package node

import (
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// TestHeartbeatFastPathNeverChangesTerm: a heartbeat of a newer term that
// reaches a leader over the TCP transport (whose fast path runs it on the
// transport's goroutine, beside the leader loop) must not step the leader
// down or change its term there. In hashicorp/raft v1.8.0 it did both, and
// a leader loop dispatching a client entry at that moment stamped it with
// the newer term, at an index where the newer leader had another entry of
// that term: the replicas then applied different entries at one index
// (upstream issue 695; found by raftmq's chaos suite, seed 20261231). The
// fork (third_party/raft FORK.md, patch 3) refuses such a heartbeat; the
// newer leader's next replicating AppendEntries, which the main loop
// handles, makes the change.
func TestHeartbeatFastPathNeverChangesTerm(t *testing.T) {
	trans, err := raft.NewTCPTransport("127.0.0.1:0", nil, 3, 5*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	conf := raft.DefaultConfig()
	conf.LocalID = "a"
	conf.Logger = hclog.NewNullLogger()
	conf.HeartbeatTimeout, conf.ElectionTimeout, conf.LeaderLeaseTimeout = 50*time.Millisecond, 50*time.Millisecond, 50*time.Millisecond
	logs := raft.NewInmemStore()
	r, err := raft.NewRaft(conf, &raft.MockFSM{}, logs, logs, raft.NewInmemSnapshotStore(), trans)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := r.Shutdown().Error(); err != nil {
			t.Error(err)
		}
	}()
	if err := r.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{ID: "a", Address: trans.LocalAddr()}}}).Error(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.LeaderCh():
	case <-time.After(10 * time.Second):
		t.Fatal("no leader")
	}
	term := func() uint64 {
		n, err := strconv.ParseUint(r.Stats()["term"], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := term()

	client, err := raft.NewTCPTransport("127.0.0.1:0", nil, 3, 5*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	hb := raft.AppendEntriesRequest{ // what a heartbeat of a newer leader "b" looks like on the wire
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("b"), Addr: []byte(client.LocalAddr())},
		Term:      before + 5,
	}
	var resp raft.AppendEntriesResponse
	if err := client.AppendEntries("a", trans.LocalAddr(), &hb, &resp); err != nil {
		t.Fatal(err)
	}
	if got := term(); got != before || r.State() != raft.Leader {
		t.Fatalf("after a term-%d heartbeat the leader of term %d is %v in term %d: the fast path changed them", before+5, before, r.State(), got)
	}
	if resp.Success || resp.Term != before {
		t.Fatalf("heartbeat answered %+v, want a refusal carrying term %d", resp, before)
	}
}
