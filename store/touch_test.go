package store

import (
	"math/rand"
	"testing"
	"time"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/vfs"
)

// The service goroutine keeps TouchAhead bytes past the write offset
// faulted in (within the write segment) and follows the writer; with
// TouchAhead 0 it touches nothing.
func TestServiceLoopTouchesAhead(t *testing.T) {
	for _, ahead := range []int64{8 << 10, 0} {
		rng := rand.New(rand.NewSource(testSeed(t)))
		cfg := smallConfig("/data/store")
		cfg.CommitLogFileSize = 1 << 20
		cfg.FlushInterval = 10 * time.Millisecond // polled every millisecond
		cfg.TouchAhead = ahead
		s := mustOpen(t, vfs.NewMem(), cfg)
		if err := s.CreateTopic(header(1), TopicConfig{Name: "t", Queues: 1}); err != nil {
			t.Fatal(err)
		}
		for i := uint64(2); i < 6; i++ {
			if _, err := s.AppendMessages(header(i), []message.Message{testMessage("t", 0, int(i), rng)}, nil); err != nil {
				t.Fatal(err)
			}
			want := s.Stats().ConfirmOffset + ahead
			flushes := s.Stats().Flushes
			deadline := time.Now().Add(10 * time.Second)
			// A poll touches, then flushes what changed: once this write
			// is flushed, a poll has run since the one before it.
			for st := s.Stats(); ahead > 0 && st.TouchedOffset < want || st.Flushes < flushes+1; st = s.Stats() {
				if time.Now().After(deadline) {
					t.Fatalf("TouchAhead %d: touched up to %d after %d flushes, want %d", ahead, st.TouchedOffset, st.Flushes-flushes, want)
				}
				time.Sleep(time.Millisecond)
			}
			if got := s.Stats().TouchedOffset; ahead == 0 && got != 0 || ahead > 0 && got != want {
				t.Fatalf("TouchAhead %d: touched up to %d (write offset %d)", ahead, got, want-ahead)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
