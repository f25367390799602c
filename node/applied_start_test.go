package node

import (
	"io"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// appliedStartLog stores 400 entries of term 1: configurations at 1 (f
// votes) and 250 (g joins as a non-voter), commands elsewhere.
func appliedStartLog(t *testing.T, st raft.LogStore) {
	t.Helper()
	one := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: "f", Address: "f"}}}
	withG := raft.Configuration{Servers: append(slices.Clone(one.Servers), raft.Server{Suffrage: raft.Nonvoter, ID: "g", Address: "g"})}
	storeTwoConfigurations(t, st, one, withG)
}

// startAt starts a Raft server "f" over st whose FSM says it holds the
// log up to (index, term). With elect it becomes leader (it is the only
// voter), else it stays a follower for the test's length.
func startAt(t *testing.T, st RaftStore, fsm raft.FSM, index, term uint64, elect bool) *raft.Raft {
	t.Helper()
	_, trans := raft.NewInmemTransport("f")
	conf := raft.DefaultConfig()
	conf.LocalID = "f"
	conf.NoSnapshotRestoreOnStart = true
	conf.HeartbeatTimeout, conf.ElectionTimeout, conf.LeaderLeaseTimeout = time.Minute, time.Minute, time.Second
	if elect {
		conf.HeartbeatTimeout, conf.ElectionTimeout, conf.LeaderLeaseTimeout = 50*time.Millisecond, 50*time.Millisecond, 50*time.Millisecond
	}
	conf.Logger = hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Info, Output: testWriter{t}})
	conf.AppliedOnStart = func() (uint64, uint64) { return index, term }
	r, err := raft.NewRaft(conf, fsm, st, st, raft.NewInmemSnapshotStore(), trans)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Shutdown().Error() })
	return r
}

// TestStartAfterFSMApplied: the raft fork's Config.AppliedOnStart. When the
// FSM holds the log up to an entry the log has (same term), Raft starts
// with it applied: the FSM is never given an entry up to it, a snapshot
// before the next apply is at that index and records the configuration
// entry among the skipped ones, and entries after it are applied once
// the node leads. A term or index the log does not have is ignored.
func TestStartAfterFSMApplied(t *testing.T) {
	st := openTestWAL(t, t.TempDir())
	defer st.Close()
	appliedStartLog(t, st)

	r := startAt(t, st, &indexFSM{}, 300, 1, false)
	if got := r.AppliedIndex(); got != 300 {
		t.Fatalf("applied index at start %d, want 300", got)
	}
	snap := r.Snapshot()
	must(t, snap.Error())
	meta, rc, err := snap.Open()
	must(t, err)
	_, _ = io.Copy(io.Discard, rc)
	_ = rc.Close()
	if meta.Index != 300 || meta.Term != 1 || len(meta.Configuration.Servers) != 2 || meta.ConfigurationIndex != 250 {
		t.Fatalf("snapshot before any apply: index %d term %d configuration %+v at %d; want 300, 1 and entry 250's",
			meta.Index, meta.Term, meta.Configuration.Servers, meta.ConfigurationIndex)
	}
	must(t, r.Shutdown().Error())

	fsm := &indexFSM{}
	r = startAt(t, st, fsm, 300, 1, true)
	select {
	case <-r.LeaderCh():
	case <-time.After(10 * time.Second):
		t.Fatal("no leadership within 10 s")
	}
	must(t, r.Barrier(10*time.Second).Error())
	var want []uint64
	for i := uint64(301); i <= 400; i++ {
		want = append(want, i)
	}
	if got := fsm.state(); !slices.Equal(got, want) {
		t.Fatalf("the FSM was given %d entries (%v...), want exactly 301..400", len(got), got[:min(len(got), 5)])
	}
	must(t, r.Shutdown().Error())

	for _, c := range []struct {
		name        string
		index, term uint64
	}{{"term differs", 300, 7}, {"beyond the log", 500, 1}} {
		r := startAt(t, st, &indexFSM{}, c.index, c.term, false)
		if got := r.AppliedIndex(); got != 0 {
			t.Fatalf("%s: applied index at start %d, want 0 (replay from the start)", c.name, got)
		}
		must(t, r.Shutdown().Error())
	}
}
