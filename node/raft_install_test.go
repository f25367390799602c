package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// TestInstallSnapshotBehindFollowerLog drives a real hashicorp/raft
// follower, on each Raft log store kind, with a scripted leader over the
// in-memory transport: the follower holds entries past the index of the
// snapshot it then receives.
//
//   - matching: the follower applied 1..10 (term 1) and the leader re-sends
//     an older snapshot (index 5, term 1), as a leader does when its first
//     InstallSnapshot timed out under load. Found by the chaos suite
//     (kill-during-install-recv, membership): upstream v1.8.0 removed every
//     log from raft-wal (a MonotonicLogStore) and then panicked with "log
//     not found" applying entry 6.
//   - conflicting: the follower holds uncommitted entries 5..10 of term 1
//     and a leader of term 2 sends a snapshot ending at (5, term 2).
//     Upstream kept a stale last log (raft-wal) or the conflicting entry
//     (boltdb), and the follower refused every later AppendEntries.
//
// third_party/raft (FORK.md) follows Raft's rule instead; the follower then
// applies what the leader sends next, exactly once and in order.
func TestInstallSnapshotBehindFollowerLog(t *testing.T) {
	for _, kind := range []string{LogStoreWAL, LogStoreBolt} {
		for _, conflicting := range []bool{false, true} {
			name := kind + "/matching"
			if conflicting {
				name = kind + "/conflicting"
			}
			t.Run(name, func(t *testing.T) { installBehindLog(t, kind, conflicting) })
		}
	}
}

// TestStartWithLogBehindSnapshot: a node stopped after it stored a
// snapshot received from the leader and before the install removed its
// older log restarts with a log that ends below that snapshot. Upstream
// v1.8.0 kept that log, and raft-wal refused every later append as a gap
// ("non-monotonic log entries: tried to append index 11 after 3", seen in
// the chaos suite after kill-during-install-recv) until the leader sent the
// snapshot again. The fork drops the covered log at start.
func TestStartWithLogBehindSnapshot(t *testing.T) {
	for _, kind := range []string{LogStoreWAL, LogStoreBolt} {
		t.Run(kind, func(t *testing.T) {
			store := openTestRaftStore(t, kind)
			fsm := &indexFSM{}
			snaps := raft.NewInmemSnapshotStore()
			f := newScriptedFollowerWith(t, store, fsm, snaps, func(f *scriptedFollower) {
				if err := store.StoreLogs(f.entries(1, 2, 3)); err != nil {
					t.Fatal(err)
				}
				sink, err := snaps.Create(raft.SnapshotVersionMax, 10, 1, f.conf, 1, f.local)
				if err != nil {
					t.Fatal(err)
				}
				if err := indexSnapshot(seq(2, 10)).Persist(sink); err != nil {
					t.Fatal(err)
				}
			})
			waitApplied(t, fsm, seq(2, 10)) // restored at start
			f.appendEntries(1, 10, 1, f.entries(1, 11, 12), 12)
			waitApplied(t, fsm, seq(2, 12))
		})
	}
}

// TestInstallStaleSnapshotKeepsAppliedEntries: a follower installed a
// snapshot (index 5), then applied entries 6..10 after it, and the leader
// sends the same snapshot again (found by the chaos suite: a leader whose
// replication state for a rejoined member was stale re-sent a snapshot that
// member had installed and applied past). The follower's log no longer held
// entry 5, so the fork's patch 1 removed its whole log and restored the
// snapshot: entries it had acknowledged (a consumer group's commits) were
// gone, and it refused the AppendEntries after 10 that the leader had in
// flight. A stale snapshot is now ignored, and the leader goes on after it. In "compacted" the follower
// also took a snapshot of its own at 10 and kept no log after it, so
// AppendEntries after 5 finds neither entry 5 nor 6..10 in its log.
func TestInstallStaleSnapshotKeepsAppliedEntries(t *testing.T) {
	for _, kind := range []string{LogStoreWAL, LogStoreBolt} {
		for _, compacted := range []bool{false, true} {
			name := kind
			if compacted {
				name += "/compacted"
			}
			t.Run(name, func(t *testing.T) {
				store := openTestRaftStore(t, kind)
				fsm := &indexFSM{}
				f := newScriptedFollower(t, store, fsm)
				f.installSnapshot(1, 5, 1, seq(2, 5))
				waitApplied(t, fsm, seq(2, 5))
				f.appendEntries(1, 5, 1, f.entries(1, 6, 10), 10)
				waitApplied(t, fsm, seq(2, 10))
				if compacted {
					rc := f.r.ReloadableConfig()
					rc.TrailingLogs = 0
					if err := f.r.ReloadConfig(rc); err != nil {
						t.Fatal(err)
					}
					if err := f.r.Snapshot().Error(); err != nil {
						t.Fatal(err)
					}
				}
				f.installSnapshot(1, 5, 1, seq(2, 5))
				// What the leader had in flight goes on after 10; then it
				// resumes after the snapshot it sent.
				f.appendEntries(1, 10, 1, f.entries(1, 11, 12), 12)
				f.appendEntries(1, 5, 1, f.entries(1, 6, 13), 13)
				waitApplied(t, fsm, seq(2, 13))
				if n := fsm.restoreCount(); n != 1 {
					t.Fatalf("FSM restored %d times, want once (the stale snapshot must not be restored)", n)
				}
			})
		}
	}
}

func installBehindLog(t *testing.T, kind string, conflicting bool) {
	store := openTestRaftStore(t, kind)
	fsm := &indexFSM{}
	f := newScriptedFollower(t, store, fsm)

	commit := uint64(10)
	if conflicting {
		commit = 4 // 5..10 of term 1 never commit
	}
	f.appendEntries(1, 0, 0, f.entries(1, 2, 10), commit)
	waitApplied(t, fsm, seq(2, commit))

	snapTerm, nextTerm, prev := uint64(1), uint64(1), uint64(10)
	if conflicting {
		snapTerm, nextTerm, prev = 2, 2, 5
	}
	f.installSnapshot(snapTerm, 5, snapTerm, seq(2, 5))
	// The leader goes on from its own log: after 10 (matching) or after
	// the snapshot (conflicting).
	last := prev + 2
	f.appendEntries(nextTerm, prev, snapTerm, f.entries(nextTerm, prev+1, last), last)
	waitApplied(t, fsm, seq(2, last))
}

// openTestRaftStore opens a Raft log store of kind in a temporary
// directory, closed when the test ends (after the follower's Raft, whose
// cleanup is registered later and runs first).
func openTestRaftStore(t *testing.T, kind string) RaftStore {
	t.Helper()
	store, err := OpenRaftStore(kind, t.TempDir(), hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return store
}

// scriptedFollower is a raft.Raft follower "f" whose leader "l" is the test.
type scriptedFollower struct {
	t     *testing.T
	r     *raft.Raft
	trans *raft.InmemTransport // the leader's end
	local *raft.InmemTransport // the follower's end
	conf  raft.Configuration
}

func newScriptedFollower(t *testing.T, store RaftStore, fsm raft.FSM) *scriptedFollower {
	return newScriptedFollowerWith(t, store, fsm, raft.NewInmemSnapshotStore(), nil)
}

// newScriptedFollowerWith lets before write the follower's stores before
// Raft opens them.
func newScriptedFollowerWith(t *testing.T, store RaftStore, fsm raft.FSM, snaps raft.SnapshotStore, before func(*scriptedFollower)) *scriptedFollower {
	fAddr, fTrans := raft.NewInmemTransport("f")
	lAddr, lTrans := raft.NewInmemTransport("l")
	fTrans.Connect(lAddr, lTrans)
	lTrans.Connect(fAddr, fTrans)
	conf := raft.DefaultConfig()
	conf.LocalID = "f"
	// The test is the only leader: the follower must not time out and
	// campaign while the script runs.
	conf.HeartbeatTimeout, conf.ElectionTimeout, conf.LeaderLeaseTimeout = time.Minute, time.Minute, time.Second
	conf.Logger = hclog.New(&hclog.LoggerOptions{Name: "follower", Level: hclog.Warn, Output: testWriter{t}})
	f := &scriptedFollower{t: t, trans: lTrans, local: fTrans, conf: raft.Configuration{Servers: []raft.Server{
		{Suffrage: raft.Voter, ID: "l", Address: lAddr}, {Suffrage: raft.Voter, ID: "f", Address: fAddr}}}}
	if before != nil {
		before(f)
	}
	r, err := raft.NewRaft(conf, fsm, store, store, snaps, fTrans)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Shutdown().Error() })
	f.r = r
	return f
}

// entries are from..to of term; index 1 is the configuration.
func (f *scriptedFollower) entries(term, from, to uint64) []*raft.Log {
	var out []*raft.Log
	if from == 2 {
		out = append(out, &raft.Log{Index: 1, Term: term, Type: raft.LogConfiguration, Data: raft.EncodeConfiguration(f.conf)})
	}
	for i := from; i <= to; i++ {
		out = append(out, &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: fmt.Appendf(nil, "%d", i)})
	}
	return out
}

func (f *scriptedFollower) header() raft.RPCHeader {
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("l"), Addr: []byte("l")}
}

func (f *scriptedFollower) appendEntries(term, prevIndex, prevTerm uint64, entries []*raft.Log, commit uint64) {
	f.t.Helper()
	req := &raft.AppendEntriesRequest{RPCHeader: f.header(), Term: term, PrevLogEntry: prevIndex, PrevLogTerm: prevTerm,
		Entries: entries, LeaderCommitIndex: commit}
	var resp raft.AppendEntriesResponse
	if err := f.trans.AppendEntries("f", "f", req, &resp); err != nil {
		f.t.Fatal(err)
	}
	if !resp.Success {
		f.t.Fatalf("AppendEntries after %d/%d of %d entries refused (follower last log %d)", prevIndex, prevTerm, len(entries), resp.LastLog)
	}
}

func (f *scriptedFollower) installSnapshot(term, index, indexTerm uint64, state []uint64) {
	f.t.Helper()
	data, _ := json.Marshal(state)
	req := &raft.InstallSnapshotRequest{RPCHeader: f.header(), SnapshotVersion: raft.SnapshotVersionMax, Term: term,
		LastLogIndex: index, LastLogTerm: indexTerm, Configuration: raft.EncodeConfiguration(f.conf), ConfigurationIndex: 1,
		Size: int64(len(data))}
	var resp raft.InstallSnapshotResponse
	if err := f.trans.InstallSnapshot("f", "f", req, &resp, bytes.NewReader(data)); err != nil {
		f.t.Fatal(err)
	}
	if !resp.Success {
		f.t.Fatalf("InstallSnapshot at %d/%d refused", index, indexTerm)
	}
}

func seq(from, to uint64) []uint64 {
	var s []uint64
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

// waitApplied waits (bounded) until the FSM's state is want.
func waitApplied(t *testing.T, fsm *indexFSM, want []uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		got := fsm.state()
		if slices.Equal(got, want) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("FSM state %v, want %v", got, want)
		case <-tick.C:
		}
	}
}

// indexFSM's state is the list of command indexes applied since its base.
type indexFSM struct {
	mu       sync.Mutex
	applied  []uint64
	restores int
}

func (m *indexFSM) restoreCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.restores
}

func (m *indexFSM) Apply(l *raft.Log) any {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.applied = append(m.applied, l.Index)
	return nil
}

func (m *indexFSM) state() []uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.applied)
}

func (m *indexFSM) Snapshot() (raft.FSMSnapshot, error) { return indexSnapshot(m.state()), nil }

func (m *indexFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var s []uint64
	if err := json.NewDecoder(rc).Decode(&s); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.applied = s
	m.restores++
	return nil
}

type indexSnapshot []uint64

func (s indexSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := json.NewEncoder(sink).Encode([]uint64(s)); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (indexSnapshot) Release() {}
