package snapstore

import (
	"bytes"
	"io"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/fsm"
	"github.com/raftmq/raftmq/internal/testseed"
	"github.com/raftmq/raftmq/mmap"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/vfs"
)

// memFixture writes nSeg synced segments into a MemFS.
func memFixture(t *testing.T, fsys *vfs.MemFS, rng *rand.Rand, nSeg int, segSize int64) ([]store.SegmentFile, fsm.SnapshotHeader) {
	t.Helper()
	must(t, fsys.MkdirAll("/log", 0o755))
	var files []store.SegmentFile
	for i := range int64(nSeg) {
		b := make([]byte, segSize)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		path := filepath.Join("/log", mmap.FileName(i*segSize))
		must(t, vfs.WriteFile(fsys, path, b))
		files = append(files, store.SegmentFile{Path: path, Start: i * segSize, Size: segSize})
	}
	confirm := int64(nSeg-1)*segSize + segSize/2
	h := fsm.SnapshotHeader{Store: store.Snapshot{AppliedTerm: 1, ConfirmOffset: confirm, LastEntryOffset: -1},
		Segments: fsm.SegmentRefs(files, confirm)}
	return files, h
}

// A power loss at any step of writing a snapshot (and of the retention that
// follows it) leaves, after reopening, only complete snapshots that read
// back exactly, at least the one that existed before, and no leftovers.
func TestCrashAtEveryStep(t *testing.T) {
	seed := uint64(testseed.Seed(t))
	var sawOld, sawNew, sawBoth bool
	for k := 0; ; k++ {
		if k > 500 {
			t.Fatal("no crash-free run within 500 steps")
		}
		fsys := vfs.NewMem()
		files, h := memFixture(t, fsys, rand.New(rand.NewPCG(seed, 1)), 3, 4096)
		want := map[uint64][]byte{}
		for _, idx := range []uint64{10, 20} {
			h.Store.AppliedIndex = idx
			var buf bytes.Buffer
			must(t, fsm.WriteSnapshot(&buf, h, files, fsm.FileSegments(fsys)))
			want[idx] = buf.Bytes()
		}
		s, err := New("/snaps", 1, Options{FS: fsys})
		must(t, err)
		h.Store.AppliedIndex = 10
		persistInto(s, h, files) // the snapshot that exists before the crash
		fsys.CrashAt(k, vfs.CrashOptions{Mode: vfs.DropUnsynced})
		h.Store.AppliedIndex = 20
		persistInto(s, h, files)
		clone, crashed := fsys.Crashed()
		if !crashed {
			break
		}
		s2, err := New("/snaps", 5, Options{FS: clone}) // no retention while checking
		if err != nil {
			t.Fatalf("k=%d: reopen: %v", k, err)
		}
		names, _ := clone.List("/snaps")
		for _, n := range names {
			if strings.HasSuffix(n, tmpSuffix) || strings.HasSuffix(n, delSuffix) {
				t.Fatalf("k=%d: leftover %s after reopen", k, n)
			}
		}
		metas, err := s2.List()
		if err != nil || len(metas) == 0 {
			t.Fatalf("k=%d: no snapshot survived (%v)", k, err)
		}
		for _, m := range metas {
			_, rc, err := s2.Open(m.ID)
			if err != nil {
				t.Fatalf("k=%d: open %s: %v", k, m.ID, err)
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if err != nil || !bytes.Equal(got, want[m.Index]) {
				t.Fatalf("k=%d: snapshot %s reads back wrong (%v)", k, m.ID, err)
			}
		}
		sawOld = sawOld || (len(metas) == 1 && metas[0].Index == 10)
		sawNew = sawNew || (len(metas) == 1 && metas[0].Index == 20)
		sawBoth = sawBoth || len(metas) == 2
	}
	if !sawOld || !sawNew || !sawBoth {
		t.Fatalf("crash points did not cover every outcome: old only %v, new only %v, both %v", sawOld, sawNew, sawBoth)
	}
}

// persistInto writes a linked snapshot, ignoring errors (a crash makes
// every operation fail).
func persistInto(s *Store, h fsm.SnapshotHeader, files []store.SegmentFile) {
	sink, err := s.Create(1, h.Store.AppliedIndex, 1, configuration(), 1, nil)
	if err != nil {
		return
	}
	if err := sink.(fsm.SegmentLinker).LinkSegments(h, files); err != nil {
		_ = sink.Cancel()
		return
	}
	_ = sink.Close()
}
