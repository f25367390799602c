package recovery

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/consumequeue"
	"github.com/raftmq/raftmq/index"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/meta"
	"github.com/raftmq/raftmq/vfs"
)

// target is a Target over fresh files, without a store.
type target struct {
	m   *meta.Meta
	cqs *consumequeue.Store
	idx *index.Service
}

func (t *target) Meta() *meta.Meta                   { return t.m }
func (t *target) DefaultQueues() int32               { return 4 }
func (t *target) ConsumeQueues() *consumequeue.Store { return t.cqs }
func (t *target) Index() *index.Service              { return t.idx }

func openTarget(t *testing.T, fsys vfs.FS, log *commitlog.Log) *target {
	t.Helper()
	cqs, err := consumequeue.Open(fsys, consumequeue.Config{Dir: "/s/" + ConsumeQueueDir, FileSize: 20 * 64})
	if err != nil {
		t.Fatal(err)
	}
	idx, err := index.Open(fsys, index.Config{Dir: "/s/" + IndexDir, MaxHashSlots: 16, MaxIndexes: 128, StoreTime: log.StoreTimestampAt})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { idx.Close(); cqs.Close() })
	return &target{m: meta.New(), cqs: cqs, idx: idx}
}

// TestReplayRange replays command frames onto the metadata and records into
// consume queues, queue table and index, through Target alone.
func TestReplayRange(t *testing.T) {
	fsys := vfs.NewMem()
	log, err := commitlog.Open(fsys, commitlog.Config{Dir: "/s/" + CommitLogDir, FileSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	hdr := func(i uint64, kind message.Kind) commitlog.EntryHeader {
		return commitlog.EntryHeader{Kind: kind, RaftIndex: i, Term: 1, StoreTimestamp: 1_700_000_000_000 + int64(i)}
	}
	create := (&meta.Command{Type: meta.CreateTopic, Topic: meta.TopicConfig{Name: "a", Queues: 2, Perm: 6}}).Frame()
	if _, _, err := log.AppendEntry(hdr(1, message.KindCommand), create, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	props, _ := message.EncodeProperties(message.Property{Key: message.PropertyKeys, Value: "k1"})
	msgs := []message.Message{{Topic: "a", QueueID: 1, Body: []byte("x"), Properties: props}, {Topic: "b", QueueID: 0, Body: []byte("y")}}
	if _, _, err := log.AppendEntry(hdr(2, message.KindMessages), nil, msgs, []int64{0, 0}, nil); err != nil {
		t.Fatal(err)
	}
	tg := openTarget(t, fsys, log)
	r := &Replay{Log: log, Logger: hclog.NewNullLogger(), Target: tg}
	if err := r.Range(log.MinOffset(), log.WriteOffset(), Scope{}); err != nil {
		t.Fatal(err)
	}
	if r.Replayed != 2 {
		t.Fatalf("replayed %d entries, want 2", r.Replayed)
	}
	if got := tg.m.Topics["a"]; got.Queues != 2 {
		t.Fatalf("topic a: %+v", got)
	}
	if got := tg.m.Topics["b"]; got.Queues != 4 || got.Perm != 6 {
		t.Fatalf("topic b, created by its record: %+v", got)
	}
	for k, want := range map[meta.QueueKey]int64{{Topic: "a", Queue: 1}: 1, {Topic: "b", Queue: 0}: 1} {
		if tg.m.Queues[k] != want {
			t.Errorf("queue table %v: %d, want %d", k, tg.m.Queues[k], want)
		}
		if q := tg.cqs.Get(k.Topic, k.Queue); q == nil || q.MaxOffset() != want {
			t.Errorf("consume queue %v: %v", k, q)
		}
	}
	// A second replay of the same range changes nothing (puts are idempotent).
	if err := r.Range(log.MinOffset(), log.WriteOffset(), Scope{DispatchOnly: true}); err != nil {
		t.Fatal(err)
	}
	if q := tg.cqs.Get("a", 1); q.MaxOffset() != 1 {
		t.Fatalf("after a second replay: %d units", q.MaxOffset())
	}
}

// TestScanTailReadErrorCutsNothing: when the file system cannot read the
// commitlog, the plan fails with the read error instead of calling the
// rest a torn or corrupt tail (which recovery would truncate).
func TestScanTailReadErrorCutsNothing(t *testing.T) {
	var failReads atomic.Bool
	fsys := vfs.WithInjector(vfs.OS(), vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind == vfs.OpRead && failReads.Load() {
			return fmt.Errorf("%w: EIO", vfs.ErrInjected)
		}
		return nil
	}))
	log, err := commitlog.Open(fsys, commitlog.Config{Dir: filepath.Join(t.TempDir(), CommitLogDir), FileSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	for i := uint64(1); i <= 3; i++ {
		h := commitlog.EntryHeader{Kind: message.KindNoop, RaftIndex: i, Term: 1, StoreTimestamp: 1_700_000_000_000}
		if _, _, err := log.AppendEntry(h, nil, nil, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if p, err := Compute(log, nil, true, hclog.NewNullLogger()); err != nil || p.Tail != TailClean || p.ConfirmOffset != log.WriteOffset() {
		t.Fatalf("readable log: %+v, %v", p, err)
	}
	failReads.Store(true)
	p, err := Compute(log, nil, true, hclog.NewNullLogger())
	if !errors.Is(err, commitlog.ErrRead) || !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("unreadable log: %v, want commitlog.ErrRead", err)
	}
	if p.Tail == TailTorn || p.Tail == TailCorrupt || p.ConfirmOffset != 0 {
		t.Fatalf("unreadable log planned a cut: tail %v at %d", p.Tail, p.ConfirmOffset)
	}
}
