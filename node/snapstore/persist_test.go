package snapstore

import (
	"bytes"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/fsm"
	"github.com/raftmq/raftmq/internal/testseed"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/verify"
	"github.com/raftmq/raftmq/vfs"
)

func storeConfig(dir string, segSize int64) store.Config {
	c := store.DefaultConfig(dir)
	c.CommitLogFileSize = segSize
	c.ConsumeQueueFileSize = 20 * 1024
	c.IndexMaxHashSlots, c.IndexMaxIndexes = 1024, 16384
	c.MaxMessageSize = 64 << 10
	c.FlushInterval, c.CleanInterval = time.Hour, time.Hour
	c.UseAllocator, c.PreTouch = false, false
	return c
}

// fsmOver opens a store in cfg.Dir and an FSM over it, closed at cleanup.
func fsmOver(t testing.TB, cfg store.Config) *fsm.FSM {
	t.Helper()
	f := openFSM(t, cfg)
	t.Cleanup(func() { _ = f.Store().Close() })
	return f
}

func openFSM(t testing.TB, cfg store.Config) *fsm.FSM {
	t.Helper()
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(vfs.OS(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return fsm.New(st, fsm.Config{FS: vfs.OS(), Store: cfg})
}

// applyBatches appends n entries of perEntry messages of bodySize bytes.
func applyBatches(t testing.TB, f *fsm.FSM, rng *rand.Rand, first uint64, n, perEntry, bodySize int) uint64 {
	t.Helper()
	idx := first
	for range n {
		c := fsm.Command{Type: fsm.CmdMessageBatch, LeaderTimestamp: int64(idx) * 1000,
			LeaderHost: message.HostPort{IP: [4]byte{127, 0, 0, 1}, Port: 9001}}
		for m := range perEntry {
			body := make([]byte, bodySize)
			for i := range body {
				body[i] = byte(rng.Uint32())
			}
			c.Messages = append(c.Messages, message.Message{Topic: "T", QueueID: int32(m % 4), BornTimestamp: 1, Body: body})
		}
		data, err := c.Encode(nil)
		if err != nil {
			t.Fatal(err)
		}
		resp := f.ApplyBatch([]*raft.Log{{Index: idx, Term: 1, Type: raft.LogCommand, Data: data}})[0].(*fsm.ApplyResponse)
		if resp.Err != nil {
			t.Fatalf("apply %d: %v", idx, resp.Err)
		}
		idx++
	}
	return idx
}

// persist takes an FSM snapshot and persists it into s, as raft does.
func persist(t testing.TB, f *fsm.FSM, s *Store, index uint64) string {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	sink, err := s.Create(1, index, 1, configuration(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	return sink.ID()
}

func confirmedBytes(t *testing.T, st *store.Store) []byte {
	t.Helper()
	confirm := st.ConfirmOffset()
	var out []byte
	files, err := st.SegmentFiles(confirm)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f.Path)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b[:min(int64(len(b)), confirm-f.Start)]...)
	}
	return out
}

// The real path: FSM.Persist into the store links (O(metadata)), the stream
// Open produces is what the old full-copy Persist wrote, and another FSM
// restores from it to byte-identical, verified commitlog.
func TestPersistLinksAndRestores(t *testing.T) {
	rng := rand.New(rand.NewPCG(uint64(testseed.Seed(t)), 10))
	root := t.TempDir()
	leader := fsmOver(t, storeConfig(filepath.Join(root, "a", "store"), 256<<10))
	next := applyBatches(t, leader, rng, 1, 40, 8, 2000) // ~650 KiB: three segments
	s := openStore(t, filepath.Join(root, "a", "snapshots"), 2)
	id := persist(t, leader, s, next-1)
	if st := s.Stats(); st.LinkedCreated != 1 || st.CopiedSegments != 0 {
		t.Fatalf("persist did not link: %+v", st)
	}

	// The same snapshot through a plain writer (the old path) is the same stream.
	snap, err := leader.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var plain plainSink
	if err := snap.Persist(&plain); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	meta, linked := readSnapshot(t, s, id)
	if !bytes.Equal(linked, plain.Bytes()) || meta.Size != int64(plain.Len()) {
		t.Fatalf("linked stream %d bytes (meta %d), plain Persist %d bytes: differ", len(linked), meta.Size, plain.Len())
	}

	applyBatches(t, leader, rng, next, 5, 8, 2000) // the leader moves on; the snapshot does not
	follower := fsmOver(t, storeConfig(filepath.Join(root, "b", "store"), 256<<10))
	_, rc, err := s.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	if err := follower.Restore(rc); err != nil {
		t.Fatal(err)
	}
	if idx, _ := follower.Store().Applied(); idx != next-1 {
		t.Fatalf("restored applied index %d, want %d", idx, next-1)
	}
	h, err := s.ReadHeader(id)
	if err != nil {
		t.Fatal(err)
	}
	got, want := confirmedBytes(t, follower.Store()), confirmedBytes(t, leader.Store())
	if int64(len(got)) != h.Store.ConfirmOffset || len(got) >= len(want) || !bytes.Equal(got, want[:len(got)]) {
		t.Fatalf("restored commitlog (%d bytes) is not the leader's first %d bytes", len(got), h.Store.ConfirmOffset)
	}
	must(t, follower.Store().Close())
	var report bytes.Buffer
	if err := verify.Stores(vfs.OS(), []string{filepath.Join(root, "b", "store")}, &report); err != nil {
		t.Fatalf("verify restored store: %v\n%s", err, report.String())
	}
}

type plainSink struct{ bytes.Buffer }

func (*plainSink) ID() string    { return "plain" }
func (*plainSink) Cancel() error { return nil }
func (*plainSink) Close() error  { return nil }

var _ io.Writer = (*plainSink)(nil)
