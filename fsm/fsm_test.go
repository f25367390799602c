package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/goleak"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/vfs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func smallStoreConfig() store.Config {
	c := store.DefaultConfig("/data/store")
	c.CommitLogFileSize = 64 << 10
	c.ConsumeQueueFileSize = 20 * 64
	c.IndexMaxHashSlots = 16
	c.IndexMaxIndexes = 128
	c.MaxMessageSize = 8 << 10
	c.FlushInterval = time.Hour
	c.CleanInterval = time.Hour
	c.UseAllocator = false
	c.PreTouch = false
	return c
}

type testFSM struct {
	*FSM
	fs       *vfs.MemFS
	cfg      store.Config
	fatalErr error // what OnFatal was called with
}

func newTestFSM(t *testing.T) *testFSM {
	t.Helper()
	fs, cfg := vfs.NewMem(), smallStoreConfig()
	st, err := store.Open(fs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := &testFSM{fs: fs, cfg: cfg}
	f.FSM = New(st, Config{FS: fs, Store: cfg, OnFatal: func(err error) { f.fatalErr = err }})
	t.Cleanup(func() { _ = f.Store().Close() })
	return f
}

func entry(t *testing.T, index uint64, c Command) *raft.Log {
	t.Helper()
	b, err := c.Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: b}
}

func batch(ts int64, topic string, n int) Command {
	c := Command{Type: CmdMessageBatch, LeaderTimestamp: ts, LeaderHost: message.HostPort{IP: [4]byte{127, 0, 0, 1}, Port: 9001}}
	for i := 0; i < n; i++ {
		c.Messages = append(c.Messages, message.Message{Topic: topic, QueueID: int32(i % 4), Body: fmt.Appendf(nil, "m%d@%d", i, ts)})
	}
	return c
}

// script is a log with every kind of outcome: applied, rejected, config.
func script(t *testing.T) []*raft.Log {
	return []*raft.Log{
		entry(t, 1, Command{Type: CmdCreateTopic, Topic: store.TopicConfig{Name: "T", Queues: 4, Perm: 6}}),
		entry(t, 2, batch(1000, "T", 5)),
		{Index: 3, Term: 1, Type: raft.LogConfiguration},
		entry(t, 4, Command{Type: CmdCreateTopic, Topic: store.TopicConfig{Name: "T", Queues: 4}}), // exists
		{Index: 5, Term: 1, Type: raft.LogCommand, Data: []byte{1, 99, 0}},                         // malformed
		entry(t, 6, batch(500, "T", 3)),                                                            // clock went back
		entry(t, 7, Command{Type: CmdCommitOffsets, Commits: []store.OffsetCommit{{Group: "g", Topic: "T", QueueID: 1, Offset: 1}}}),
		entry(t, 8, Command{Type: CmdSetMemberMeta, MemberID: "n1", MemberAPIAddr: "127.0.0.1:9001"}),
	}
}

func TestApplyBatchOutcomes(t *testing.T) {
	f := newTestFSM(t)
	resp := f.ApplyBatch(script(t))
	if len(resp) != 8 {
		t.Fatalf("%d responses", len(resp))
	}
	if r := resp[1].(*ApplyResponse); r.Err != nil || len(r.Results) != 5 {
		t.Fatalf("batch: %+v", r)
	}
	if resp[2] != nil {
		t.Fatalf("configuration entry answered %v", resp[2])
	}
	if r := resp[3].(*ApplyResponse); !errors.Is(r.Err, store.ErrTopicExists) {
		t.Fatalf("duplicate topic: %v", r.Err)
	}
	if r := resp[4].(*ApplyResponse); !errors.Is(r.Err, ErrUnknownCommand) {
		t.Fatalf("malformed: %v", r.Err)
	}
	r6 := resp[5].(*ApplyResponse)
	if r6.Err != nil || r6.Results[0].StoreTimestamp != 1000 {
		t.Fatalf("store timestamp must stay monotonic (1000), got %+v", r6)
	}
	if got := f.Stats(); got != (Stats{Applied: 5, Rejected: 2, Other: 1}) {
		t.Fatalf("stats %+v", got)
	}
	if idx, _ := f.Store().Applied(); idx != 8 {
		t.Fatalf("applied index %d, want 8 (rejected entries advance it too)", idx)
	}
	if f.Members()["n1"] != "127.0.0.1:9001" {
		t.Fatalf("members %v", f.Members())
	}
	if off, ok := f.Store().ConsumerOffset("g", "T", 1); !ok || off != 1 {
		t.Fatalf("consumer offset %d %v", off, ok)
	}
}

func TestReplaySkipsAppliedEntries(t *testing.T) {
	f := newTestFSM(t)
	log := script(t)
	f.ApplyBatch(log[:4])
	before := f.Store().ConfirmOffset()
	// Raft re-delivers 1..8 after a restart: 1..4 (3 is configuration) skip.
	resp := f.ApplyBatch(log)
	if len(resp) != len(log) {
		t.Fatalf("%d responses for %d entries", len(resp), len(log))
	}
	for i := 0; i < 4; i++ {
		if i == 2 {
			continue
		}
		if r := resp[i].(*ApplyResponse); !errors.Is(r.Err, store.ErrAlreadyApplied) {
			t.Fatalf("entry %d: %v", i+1, r.Err)
		}
	}
	st := f.Stats()
	if st.Skipped != 3 || st.Applied != 2+3 {
		t.Fatalf("stats %+v: want 3 skipped and 5 applied", st)
	}
	if f.Store().ConfirmOffset() <= before {
		t.Fatal("tail was not applied")
	}
}

// A SetMemberMeta entry is kept in the store's meta: an FSM over the
// store reopened from disk (a restart that Raft gives no entry it holds)
// has the member map without a replay, the newest address of each id.
func TestMembersSurviveReopenWithoutReplay(t *testing.T) {
	f := newTestFSM(t)
	f.ApplyBatch(script(t))
	f.Apply(entry(t, 9, Command{Type: CmdSetMemberMeta, MemberID: "n2", MemberAPIAddr: "127.0.0.1:9002"}))
	f.Apply(entry(t, 10, Command{Type: CmdSetMemberMeta, MemberID: "n1", MemberAPIAddr: "127.0.0.1:9011"}))
	if err := f.Store().Close(); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(f.fs, f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	again := New(st, Config{FS: f.fs, Store: f.cfg})
	want := map[string]string{"n1": "127.0.0.1:9011", "n2": "127.0.0.1:9002"}
	if got := again.Members(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("members after reopen %v, want %v", got, want)
	}
	if got := again.Stats(); got != (Stats{}) {
		t.Fatalf("stats %+v: nothing was replayed", got)
	}
}

type memSink struct {
	bytes.Buffer
	closed, cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }
func (s *memSink) Close() error  { s.closed = true; return nil }

func readQueue(t *testing.T, st *store.Store, topic string, q int32) []string {
	t.Helper()
	res, err := st.GetMessages(topic, q, 0, 1000, 1<<20, "")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range res.Messages {
		out = append(out, fmt.Sprintf("%d/%d/%d:%s", m.QueueOffset, m.PhysicalOffset, m.StoreTimestamp, m.Body))
	}
	return out
}

func TestSnapshotRestore(t *testing.T) {
	src := newTestFSM(t)
	log := script(t)
	for i := uint64(0); i < 40; i++ { // roll a few 64 KiB segments
		log = append(log, entry(t, 9+i, batch(2000+int64(i), "T", 50)))
	}
	src.ApplyBatch(log)
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil || !sink.closed {
		t.Fatalf("persist: %v (closed %v)", err, sink.closed)
	}
	snap.Release()
	if cp := src.Store().Stats().CheckpointOffset; cp < src.Store().ConfirmOffset() {
		t.Fatalf("checkpoint %d below confirm %d after Persist", cp, src.Store().ConfirmOffset())
	}

	dst := newTestFSM(t)
	dst.ApplyBatch(script(t)[:2]) // state that the restore must discard
	if err := dst.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	si, _ := src.Store().Applied()
	di, _ := dst.Store().Applied()
	if si != di || src.Store().ConfirmOffset() != dst.Store().ConfirmOffset() {
		t.Fatalf("applied %d/%d confirm %d/%d", si, di, src.Store().ConfirmOffset(), dst.Store().ConfirmOffset())
	}
	for q := int32(0); q < 4; q++ {
		a, b := readQueue(t, src.Store(), "T", q), readQueue(t, dst.Store(), "T", q)
		if fmt.Sprint(a) != fmt.Sprint(b) || len(a) == 0 {
			t.Fatalf("queue %d differs after restore: %d vs %d messages", q, len(a), len(b))
		}
	}
	if dst.Members()["n1"] == "" {
		t.Fatal("member map not restored")
	}
	// Both continue identically.
	next := entry(t, 100, batch(3000, "T", 7))
	src.Apply(next)
	dst.Apply(next)
	if src.Store().ConfirmOffset() != dst.Store().ConfirmOffset() {
		t.Fatal("diverged after restore")
	}
}

func TestRestoreRejectsCorruptStream(t *testing.T) {
	src := newTestFSM(t)
	src.ApplyBatch(script(t))
	snap, _ := src.Snapshot()
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	b := sink.Bytes()
	b[len(b)-20] ^= 0x55 // inside the last segment

	dst := newTestFSM(t)
	dst.ApplyBatch(script(t)[:2])
	before, _ := dst.Store().Applied()
	if err := dst.Restore(io.NopCloser(bytes.NewReader(b))); !errors.Is(err, ErrBadSnapshot) {
		t.Fatalf("restore of corrupt stream: %v", err)
	}
	if idx, _ := dst.Store().Applied(); idx != before {
		t.Fatalf("store changed by a failed restore: %d -> %d", before, idx)
	}
	// A failed restore is fatal: nothing more is applied to the old store.
	if !errors.Is(dst.fatalErr, ErrFatal) {
		t.Fatalf("OnFatal not called with ErrFatal: %v", dst.fatalErr)
	}
	resp := dst.Apply(script(t)[5]).(*ApplyResponse)
	if !errors.Is(resp.Err, ErrFatal) {
		t.Fatalf("entry applied after a failed restore: %v", resp.Err)
	}
	if idx, _ := dst.Store().Applied(); idx != before {
		t.Fatalf("store changed after a failed restore: %d -> %d", before, idx)
	}
}

// Raft runs FSMSnapshot.Persist on its snapshot goroutine while the FSM
// goroutine may restore a snapshot a leader sent: the captured store is then
// closed. Persist must fail rather than store a header that claims the
// confirm offset with none of the segments (chaos seed 1796331971389724010:
// the leader later sent that snapshot and the follower could never restore).
func TestPersistAfterRestoreFails(t *testing.T) {
	other := newTestFSM(t)
	other.ApplyBatch(script(t))
	osnap, _ := other.Snapshot()
	var stream memSink
	if err := osnap.Persist(&stream); err != nil {
		t.Fatal(err)
	}

	f := newTestFSM(t)
	log := script(t)
	for i := uint64(0); i < 40; i++ {
		log = append(log, entry(t, 9+i, batch(2000+int64(i), "T", 50)))
	}
	f.ApplyBatch(log)
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Restore(io.NopCloser(bytes.NewReader(stream.Bytes()))); err != nil {
		t.Fatal(err)
	}
	var sink memSink
	err = snap.Persist(&sink)
	if err == nil {
		h, herr := ReadSnapshotHeader(bytes.NewReader(sink.Bytes()))
		t.Fatalf("persist of a closed store's capture succeeded: header %d segments, confirm %d (read: %v)",
			len(h.Segments), h.Store.ConfirmOffset, herr)
	}
	if !sink.cancelled || sink.closed {
		t.Fatalf("sink cancelled %v closed %v after a failed persist", sink.cancelled, sink.closed)
	}
}

func TestHeaderMustCoverConfirmOffset(t *testing.T) {
	for _, tc := range []struct {
		name string
		snap store.Snapshot
		segs []SegmentRef
	}{
		{"no segments", store.Snapshot{ConfirmOffset: 100}, nil},
		{"starts after min", store.Snapshot{ConfirmOffset: 100}, []SegmentRef{{Start: 10, Length: 90}}},
		{"gap", store.Snapshot{ConfirmOffset: 100}, []SegmentRef{{Start: 0, Length: 40}, {Start: 50, Length: 50}}},
		{"short", store.Snapshot{ConfirmOffset: 100}, []SegmentRef{{Start: 0, Length: 99}}},
	} {
		b := EncodeSnapshotHeader(SnapshotHeader{Store: tc.snap, Segments: tc.segs})
		if _, err := ReadSnapshotHeader(bytes.NewReader(b)); !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("%s: read %v, want ErrBadSnapshot", tc.name, err)
		}
	}
	ok := EncodeSnapshotHeader(SnapshotHeader{Store: store.Snapshot{ConfirmOffset: 100, MinOffset: 100}})
	if _, err := ReadSnapshotHeader(bytes.NewReader(ok)); err != nil {
		t.Errorf("empty store: %v", err)
	}
}
