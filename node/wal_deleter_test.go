package node

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft-wal/types"

	walfs "github.com/hashicorp/raft-wal/fs"
)

// gatedVFS is raft-wal's file system whose Delete waits for open to be
// closed (or, with drop, never deletes: a crash before the removal).
type gatedVFS struct {
	types.VFS
	open    chan struct{}
	drop    bool
	deletes chan string // each path Delete was called for
}

func (g *gatedVFS) Delete(dir, name string) error {
	g.deletes <- filepath.Join(dir, name)
	if g.drop {
		return nil
	}
	<-g.open
	return g.VFS.Delete(dir, name)
}

func walSegments(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	must(t, err)
	return names
}

// fillWAL stores entries 1..n (about 2 KiB each) and returns n.
func fillWAL(t *testing.T, st RaftStore, n int) uint64 {
	t.Helper()
	for i := 1; i <= n; i += 50 {
		must(t, storeWALBatch(st, uint64(i), min(50, n-i+1)))
	}
	return uint64(n)
}

// TestWALCompactionDoesNotWaitForSegmentRemoval: Raft's compaction
// (DeleteRange of the log's head) returns, and appends go on, while the
// removal of the segments it dropped is still blocked; Close waits for that
// removal. raft-wal removes them under its write lock, and under load on a
// shared disk each removal took about 100 ms.
func TestWALCompactionDoesNotWaitForSegmentRemoval(t *testing.T) {
	dir := t.TempDir()
	gate := &gatedVFS{VFS: walfs.New(), open: make(chan struct{}), deletes: make(chan string, 1024)}
	st, err := openWALStore(dir, walTestSegment, gate, hclog.NewNullLogger())
	must(t, err)
	last := fillWAL(t, st, 2000) // about 4 MiB: several 1 MiB segments
	before := walSegments(t, dir)
	if len(before) < 3 {
		t.Fatalf("%d segments after 2000 entries: want several to compact", len(before))
	}

	compacted := make(chan error, 1)
	go func() { compacted <- st.DeleteRange(1, last-100) }()
	select {
	case err := <-compacted:
		must(t, err)
	case <-time.After(30 * time.Second): // a bound, not a wait for the outcome
		close(gate.open)
		t.Fatal("DeleteRange still waits for the removal of the segments it dropped after 30 s")
	}
	doomed := <-gate.deletes // at least one removal is under way
	must(t, storeWALBatch(st, last+1, 50))
	if _, err := os.Stat(doomed); err != nil {
		t.Fatalf("the segment being removed is gone before its removal was let through: %v", err)
	}
	checkWAL(t, st, last+50)

	close(gate.open)
	must(t, st.Close())
	if _, err := os.Stat(doomed); !os.IsNotExist(err) {
		t.Fatalf("%s still there after Close (err %v): Close did not wait for the removal", doomed, err)
	}
	if after := walSegments(t, dir); len(after) >= len(before) {
		t.Fatalf("%d segments after compaction and Close, %d before", len(after), len(before))
	}
}

// TestWALSegmentsLeftByACrashAreRemovedOnOpen: segments a compaction
// dropped whose removal never ran (the process died first) are deleted
// when the log is opened again, and the log reads back whole.
func TestWALSegmentsLeftByACrashAreRemovedOnOpen(t *testing.T) {
	dir := t.TempDir()
	gate := &gatedVFS{VFS: walfs.New(), drop: true, deletes: make(chan string, 1024)}
	st, err := openWALStore(dir, walTestSegment, gate, hclog.NewNullLogger())
	must(t, err)
	last := fillWAL(t, st, 2000)
	must(t, st.DeleteRange(1, last-100))
	must(t, st.Close())
	close(gate.deletes)
	var orphans []string
	for p := range gate.deletes {
		orphans = append(orphans, p)
	}
	if len(orphans) == 0 {
		t.Fatal("the compaction dropped no segment")
	}
	for _, p := range orphans {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("orphan %s: %v (the simulated crash should have left it)", p, err)
		}
	}

	reopened, err := openWALStore(dir, walTestSegment, walfs.New(), hclog.NewNullLogger())
	must(t, err)
	first, _ := checkWAL(t, reopened, last)
	if first != last-99 {
		t.Fatalf("first index %d after reopening, want %d", first, last-99)
	}
	must(t, reopened.Close())
	for _, p := range orphans {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("orphan %s still there after reopening (err %v)", p, err)
		}
	}
}
