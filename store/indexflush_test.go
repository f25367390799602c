package store

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/recovery"
	"github.com/raftmq/raftmq/vfs"
)

// The periodic flush and a snapshot's (FlushTo) leave the index to every
// IndexFlushInterval while the checkpoint moves on; a power loss then takes
// the unsynced index pages, and recovery re-indexes from the checkpoint's
// index state: every message is found by key and by UNIQ_KEY again,
// exactly once. With large messages too, whose bodies the re-index does not
// read (commitlog.Scanner.Sparse).
func TestIndexFlushLagsCheckpoint(t *testing.T) {
	seed := testSeed(t)
	// The flush between the index flushes: the service loop's, or a
	// snapshot's (FlushTo).
	flushes := map[string]func(s *Store) error{
		"periodic": func(s *Store) error { return s.flushPeriodic() },
		"FlushTo":  func(s *Store) error { return s.FlushTo(s.ConfirmOffset()) },
	}
	for _, name := range []string{"periodic", "FlushTo"} {
		t.Run(name, func(t *testing.T) { indexFlushLagsCheckpoint(t, seed, flushes[name], 0) })
	}
	// Every fifth message larger than the scanner's read chunk (256 KiB).
	t.Run("large", func(t *testing.T) { indexFlushLagsCheckpoint(t, seed, flushes["periodic"], 300<<10) })
}

func indexFlushLagsCheckpoint(t *testing.T, seed int64, lagging func(s *Store) error, large int) {
	for _, mode := range []vfs.CrashMode{vfs.DropUnsynced, vfs.TearUnsynced} {
		rng := rand.New(rand.NewSource(seed))
		mem := vfs.NewMem()
		cfg := smallConfig("/data/store")
		if large > 0 {
			cfg.CommitLogFileSize, cfg.MaxMessageSize = 8<<20, 2*large
		}
		s := mustOpen(t, mem, cfg)
		if err := s.CreateTopic(header(1), TopicConfig{Name: "ix", Queues: 2}); err != nil {
			t.Fatal(err)
		}
		n := 0
		appendSome := func(from, to uint64) {
			for i := from; i < to; i++ {
				msgs := make([]message.Message, 4)
				for j := range msgs {
					msgs[j] = testMessage("ix", int32(n%2), n, rng)
					if large > 0 && n%5 == 0 {
						msgs[j].Body = append(msgs[j].Body, make([]byte, large)...)
					}
					n++
				}
				if _, err := s.AppendMessages(header(i), msgs, nil); err != nil {
					t.Fatal(err)
				}
			}
		}
		appendSome(2, 20)
		if err := s.Flush(); err != nil { // index included
			t.Fatal(err)
		}
		appendSome(20, 60)
		if err := lagging(s); err != nil {
			t.Fatal(err)
		}
		ckpt, err := recovery.ReadCheckpoint(mem, cfg.Dir)
		if err != nil {
			t.Fatal(err)
		}
		if ckpt.Index.ConfirmOffset <= 0 || ckpt.Index.ConfirmOffset >= ckpt.ConfirmOffset {
			t.Fatalf("seed %d: checkpoint index state covers %d of %d: the index did not lag", seed, ckpt.Index.ConfirmOffset, ckpt.ConfirmOffset)
		}
		crashed := mem.CrashClone(vfs.CrashOptions{Mode: mode, Rand: rand.New(rand.NewSource(seed))})
		_ = s.Close()
		s = mustOpen(t, crashed, cfg)
		// The re-indexed entries are durable when Open returns: a node
		// killed again at once does not re-index them again.
		after, err := recovery.ReadCheckpoint(crashed, cfg.Dir)
		if err != nil {
			t.Fatal(err)
		}
		if after.Index.ConfirmOffset != after.ConfirmOffset || after.ConfirmOffset != ckpt.ConfirmOffset {
			t.Fatalf("seed %d mode %v: after recovery the checkpoint's index state covers %d of %d (before the crash %d): the re-indexed entries are not durable",
				seed, mode, after.Index.ConfirmOffset, after.ConfirmOffset, ckpt.ConfirmOffset)
		}
		for k := 0; k < n; k++ {
			label := fmt.Sprintf("seed %d mode %v message %d", seed, mode, k)
			got, err := s.QueryByKey("ix", fmt.Sprintf("k%d", k), 4, 0, 1<<62)
			if err != nil || len(got) != 1 {
				t.Fatalf("%s: by key: %v, %d hits", label, err, len(got))
			}
			byID, err := s.LookupByMsgID("ix", fmt.Sprintf("U%08d", k))
			if err != nil || len(byID) != 1 || byID[0].PhysicalOffset != got[0].PhysicalOffset {
				t.Fatalf("%s: by UNIQ_KEY: %v, %d hits", label, err, len(byID))
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestIndexDurableWhenIdle: the periodic flush leaves the index to every
// IndexFlushInterval while writes go on, and flushes it at the first
// periodic flush that finds nothing applied since the last checkpoint.
func TestIndexDurableWhenIdle(t *testing.T) {
	rng := rand.New(rand.NewSource(testSeed(t)))
	mem := vfs.NewMem()
	cfg := smallConfig("/data/store")
	s := mustOpen(t, mem, cfg)
	defer s.Close()
	if err := s.CreateTopic(header(1), TopicConfig{Name: "ix", Queues: 1}); err != nil {
		t.Fatal(err)
	}
	checkpoint := func() recovery.Checkpoint {
		t.Helper()
		ckpt, err := recovery.ReadCheckpoint(mem, cfg.Dir)
		if err != nil {
			t.Fatal(err)
		}
		return ckpt
	}
	for i := uint64(2); i < 40; i++ {
		if _, err := s.AppendMessages(header(i), []message.Message{testMessage("ix", 0, int(i), rng)}, nil); err != nil {
			t.Fatal(err)
		}
		if i == 10 {
			if err := s.Flush(); err != nil { // index included
				t.Fatal(err)
			}
		}
	}
	if err := s.flushPeriodic(); err != nil {
		t.Fatal(err)
	}
	if c := checkpoint(); c.Index.ConfirmOffset >= c.ConfirmOffset {
		t.Fatalf("after writes the periodic flush synced the index (%d of %d): IndexFlushInterval not honoured", c.Index.ConfirmOffset, c.ConfirmOffset)
	}
	if err := s.flushPeriodic(); err != nil { // nothing applied since
		t.Fatal(err)
	}
	if c := checkpoint(); c.Index.ConfirmOffset != c.ConfirmOffset {
		t.Fatalf("an idle store's periodic flush left the index at %d of %d", c.Index.ConfirmOffset, c.ConfirmOffset)
	}
}

// TestFlushByBytes: with a flush interval of an hour, FlushBytes of
// commitlog waiting is enough for the service loop to flush and checkpoint.
func TestFlushByBytes(t *testing.T) {
	cfg := smallConfig("/s")
	cfg.FlushBytes = 16 << 10
	s := mustOpen(t, vfs.NewMem(), cfg)
	defer s.Close()
	var idx uint64
	body := make([]byte, 1000)
	for s.Stats().MaxOffset < 32<<10 {
		idx++
		m := testMessage("demo", 0, int(idx), nil)
		m.Body = body
		if _, err := s.AppendMessages(header(idx), []message.Message{m}, nil); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.Stats().CheckpointOffset < cfg.FlushBytes {
		if time.Now().After(deadline) {
			t.Fatalf("checkpoint at %d after %d bytes were applied, want at least FlushBytes %d flushed",
				s.Stats().CheckpointOffset, s.Stats().MaxOffset, cfg.FlushBytes)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
