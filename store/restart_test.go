package store

import (
	"fmt"
	"testing"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/recovery"
	"github.com/raftmq/raftmq/vfs"
)

// TestRestartWorkIndependentOfSize: a restart verifies and replays only what
// lies above the checkpoint, so its work does not grow with the store. Two
// stores, one ten times the other, each get the same tail of entries after
// their last checkpoint. After a kill (abort file left, files in the page
// cache) recovery must scan from the checkpoint and replay exactly the tail;
// killed again at once it must replay nothing (the restart wrote back what
// it replayed before it opened); after a clean shutdown it must replay
// nothing. Real files and mappings.
// BenchmarkRecoveryRestart measures the time of the same restarts.
func TestRestartWorkIndependentOfSize(t *testing.T) {
	const tail = 7
	for _, entries := range []uint64{20, 200} {
		t.Run(fmt.Sprintf("entries=%d", entries), func(t *testing.T) {
			cfg := smallConfig(t.TempDir())
			cfg.CommitLogFileSize = 1 << 20
			s := mustOpen(t, vfs.OS(), cfg)
			next := appendRestartEntries(t, s, 1, entries)
			if err := s.Flush(); err != nil {
				t.Fatal(err)
			}
			ckpt := s.ConfirmOffset()
			appendRestartEntries(t, s, next, tail)
			end, applied := s.ConfirmOffset(), next+tail-1
			abandon(s)

			s = mustOpen(t, vfs.OS(), cfg)
			p := s.RecoveryPlan()
			switch {
			case p.Mode != recovery.Abnormal:
				t.Fatalf("after the kill: mode %v, want abnormal", p.Mode)
			case p.ScanFrom != ckpt || p.ConfirmOffset != end:
				t.Fatalf("after the kill: scanned [%d, %d), want [%d, %d) (checkpoint to end)", p.ScanFrom, p.ConfirmOffset, ckpt, end)
			case p.Entries != tail || s.recoveryReplayed != tail:
				t.Fatalf("after the kill: verified %d and replayed %d entries, want the %d above the checkpoint", p.Entries, s.recoveryReplayed, tail)
			}
			if idx, _ := s.Applied(); idx != applied {
				t.Fatalf("applied index %d, want %d", idx, applied)
			}
			checkRestartKeys(t, s, next+tail)

			// Killed again at once: the restart wrote back what it replayed
			// and re-indexed before Open returned, so nothing is done twice.
			ck, err := recovery.ReadCheckpoint(vfs.OS(), cfg.Dir)
			if err != nil {
				t.Fatal(err)
			}
			if ck.ConfirmOffset != end || ck.Index.ConfirmOffset != end {
				t.Fatalf("after the restart the checkpoint covers %d (index %d), want %d", ck.ConfirmOffset, ck.Index.ConfirmOffset, end)
			}
			abandon(s)
			s = mustOpen(t, vfs.OS(), cfg)
			if p := s.RecoveryPlan(); p.Mode != recovery.Abnormal || p.ScanFrom != end || p.Entries != 0 || s.recoveryReplayed != 0 {
				t.Fatalf("after a second kill: mode %v, scan from %d (end %d), verified %d, replayed %d; want abnormal, nothing replayed",
					p.Mode, p.ScanFrom, end, p.Entries, s.recoveryReplayed)
			}
			checkRestartKeys(t, s, next+tail)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}

			s = mustOpen(t, vfs.OS(), cfg)
			defer s.Close()
			p = s.RecoveryPlan()
			if p.Mode != recovery.Normal || p.ScanFrom != end || p.Entries != 0 || s.recoveryReplayed != 0 {
				t.Fatalf("after a clean stop: mode %v, scan from %d (end %d), verified %d, replayed %d; want normal, nothing replayed",
					p.Mode, p.ScanFrom, end, p.Entries, s.recoveryReplayed)
			}
			checkRestartKeys(t, s, next+tail)
		})
	}
}

// appendRestartEntries appends n entries of two messages from Raft index
// first on and returns the next index.
func appendRestartEntries(t *testing.T, s *Store, first, n uint64) uint64 {
	t.Helper()
	for i := first; i < first+n; i++ {
		msgs := []message.Message{testMessage("restart", 0, int(2*i), nil), testMessage("restart", 1, int(2*i+1), nil)}
		res, err := s.AppendMessages(header(i), msgs, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
	}
	return first + n
}

// checkRestartKeys: every message's key is found by the index and every
// message is in its consume queue, the tail's included.
func checkRestartKeys(t *testing.T, s *Store, next uint64) {
	t.Helper()
	for i := uint64(1); i < next; i++ {
		for _, n := range []uint64{2 * i, 2*i + 1} {
			res, err := s.QueryByKey("restart", fmt.Sprintf("k%d", n), 4, 0, 1<<62)
			if err != nil || len(res) != 1 {
				t.Fatalf("key k%d: %d results, %v", n, len(res), err)
			}
		}
	}
	for q := int32(0); q < 2; q++ {
		if got := s.cqs.Get("restart", q).MaxOffset(); got != int64(next-1) {
			t.Fatalf("queue %d holds %d units, want %d", q, got, next-1)
		}
	}
}
