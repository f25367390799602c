package node

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/raftmq/raftmq/internal/testseed"
)

// TestRaftWALInterruptedRotation builds, from real raft-wal files, the
// state a crash leaves between the fsync of the append that seals a
// segment and the metadata commit of the rotation: the metadata calls the
// segment the unsealed tail, its file is sealed. raft-wal v0.4.0 then failed
// every append with "segment is sealed" (the kill -9 test hit it about once
// in 15 runs); the fork in third_party/raft-wal completes the rotation at
// Open. The same state with the seal's last byte missing (a power loss
// before the fsync finished) must reopen unsealed, without the torn batch,
// and take appends into the same segment.
func TestRaftWALInterruptedRotation(t *testing.T) {
	rng := rand.New(rand.NewPCG(uint64(testseed.Seed(t)), 3))
	before, sealedAt, pre, post, seg := sealingAppend(t, rng)
	t.Logf("batch (%d, %d] sealed %s", before, sealedAt, filepath.Base(seg))
	old, err := os.ReadFile(filepath.Join(pre, "wal", seg))
	must(t, err)
	cur, err := os.ReadFile(filepath.Join(post, "wal", seg))
	must(t, err)
	// The seal may write past the preallocated size: compare as if the
	// file had been zeros there.
	old = append(old, make([]byte, max(0, len(cur)-len(old)))...)
	lo, hi := diffRange(old, cur)
	if lo >= hi {
		t.Fatal("the sealing batch changed no byte of its segment")
	}

	t.Run("sealed", func(t *testing.T) {
		dir := hybridWAL(t, pre, seg, cur)
		st := openTestWAL(t, dir)
		checkWAL(t, st, sealedAt)
		must(t, st.Close())
		if last := appendAndReopen(t, dir, sealedAt+1, 5); last != sealedAt+5 {
			t.Fatalf("last index %d, want %d", last, sealedAt+5)
		}
		if got := filepath.Base(newestSegment(t, filepath.Join(dir, "wal"))); got == seg {
			t.Fatalf("the append after reopening went to the sealed segment %s", seg)
		}
	})

	t.Run("torn-seal", func(t *testing.T) {
		torn := append([]byte(nil), old...)
		copy(torn[lo:hi-1], cur[lo:hi-1]) // all of the sealing append but its last byte
		dir := hybridWAL(t, pre, seg, torn)
		st := openTestWAL(t, dir)
		_, last := checkWAL(t, st, before)
		if last != before {
			t.Fatalf("last index %d: the torn sealing batch (%d, %d] must be gone", last, before, sealedAt)
		}
		must(t, st.Close())
		if got := filepath.Base(newestSegment(t, filepath.Join(dir, "wal"))); got != seg {
			t.Fatalf("opening a torn seal sealed %s and rotated to %s: it must stay the unsealed tail", seg, got)
		}
		appendAndReopen(t, dir, before+1, 3)
	})
}

// sealingAppend appends random batches to a raft-wal log, each one from a
// closed copy of the log, until one batch seals the newest segment. It
// returns the last index before and after that batch, the copies of the log
// before (pre) and after (post) it, and the sealed segment's file name.
func sealingAppend(t *testing.T, rng *rand.Rand) (before, after uint64, pre, post, seg string) {
	t.Helper()
	dir := t.TempDir()
	st := openTestWAL(t, dir)
	must(t, st.Close())
	next := uint64(1)
	for range 5000 {
		seg = filepath.Base(newestSegment(t, filepath.Join(dir, "wal")))
		pre = t.TempDir()
		copyWALDir(t, dir, pre)
		st := openTestWAL(t, dir)
		n := 1 + rng.IntN(16)
		must(t, storeWALBatch(st, next, n))
		must(t, st.Close())
		before, after, next = next-1, next+uint64(n)-1, next+uint64(n)
		post = t.TempDir()
		copyWALDir(t, dir, post)
		// Opening completes a rotation the Close may have cut short; a
		// newer segment then shows that this batch sealed seg.
		st = openTestWAL(t, post)
		must(t, st.Close())
		if filepath.Base(newestSegment(t, filepath.Join(post, "wal"))) != seg {
			return before, after, pre, post, seg
		}
	}
	t.Fatal("no segment was sealed after 5000 batches")
	return
}

// hybridWAL is a copy of the log in pre with segment file seg replaced by
// content: pre's metadata with a later state of one file.
func hybridWAL(t *testing.T, pre, seg string, content []byte) string {
	t.Helper()
	dir := t.TempDir()
	copyWALDir(t, pre, dir)
	must(t, os.WriteFile(filepath.Join(dir, "wal", seg), content, 0o644))
	return dir
}

// copyWALDir copies the closed log in from (its wal/ directory) to to.
func copyWALDir(t *testing.T, from, to string) {
	t.Helper()
	src, dst := filepath.Join(from, "wal"), filepath.Join(to, "wal")
	must(t, os.MkdirAll(dst, 0o755))
	entries, err := os.ReadDir(src)
	must(t, err)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		must(t, err)
		must(t, os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644))
	}
}

// TestRaftWALTailTruncationSurvivesReopen: Raft truncates a follower's log
// suffix when a new leader disagrees with it. raft-wal v0.4.0 marked the
// unsealed tail sealed in its metadata without writing the index block a
// sealed segment is read through, so the next Open failed every read of that
// segment with "sealed segment has no index block" (raft panics on it at
// start; the chaos suite on raft-wal hit it after a kill during a snapshot
// install). The fork writes the index block first.
func TestRaftWALTailTruncationSurvivesReopen(t *testing.T) {
	rng := rand.New(rand.NewPCG(uint64(testseed.Seed(t)), 4))
	dir := t.TempDir()
	st := openTestWAL(t, dir)
	next := uint64(1)
	for range 1 + rng.IntN(20) {
		n := 1 + rng.IntN(8)
		must(t, storeWALBatch(st, next, n))
		next += uint64(n)
	}
	last := next - 1
	keep := last - uint64(rng.IntN(int(min(last, 10)))) // truncate (keep, last]
	if keep == last {
		keep--
	}
	must(t, st.DeleteRange(keep+1, last))
	must(t, st.Close())

	st = openTestWAL(t, dir)
	if _, got := checkWAL(t, st, keep); got != keep {
		t.Fatalf("last index %d after truncating (%d, %d]", got, keep, last)
	}
	must(t, st.Close())
	if got := appendAndReopen(t, dir, keep+1, 4); got != keep+4 {
		t.Fatalf("last index %d, want %d", got, keep+4)
	}
}

// appendAndReopen opens the log in dir, appends n entries from index from,
// closes it, and checks the reopened log holds them (and all before); it
// returns the reopened log's last index.
func appendAndReopen(t *testing.T, dir string, from uint64, n int) uint64 {
	t.Helper()
	st := openTestWAL(t, dir)
	must(t, storeWALBatch(st, from, n))
	must(t, st.Close())
	st = openTestWAL(t, dir)
	_, last := checkWAL(t, st, from+uint64(n)-1)
	must(t, st.Close())
	return last
}
