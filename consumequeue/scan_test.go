package consumequeue

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/raftmq/raftmq/mmap"
	"github.com/raftmq/raftmq/vfs"
)

// scanMapped is scanSegments through the mappings only.
func scanMapped(segs []mmap.Segment, st scanState) (int64, scanState) {
	end := segs[0].Start
	for _, s := range segs {
		n, next, stopped := scanUnits(s.File.Bytes(), st)
		st, end = next, s.Start+int64(n)*UnitSize
		if stopped {
			break
		}
	}
	return end, st
}

// TestScanThroughMatchesMapping: on real files recovery reads the queue
// files with pread in chunks; for random queue files (fillers first, units
// across chunk and file boundaries, an invalid unit, a gap of zeros or a
// unit going backwards anywhere) it finds the same end and state as a scan
// through the mappings.
func TestScanThroughMatchesMapping(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	const fileSize = 30000 * UnitSize // larger than a chunk
	dir := t.TempDir()
	for round := 0; round < 40; round++ {
		nfiles := 1 + rng.Intn(3)
		data := make([]byte, nfiles*fileSize)
		units := rng.Intn(len(data)/UnitSize + 1)
		fillers := rng.Intn(3) * rng.Intn(2000)
		phy := int64(0)
		for i := 0; i < units; i++ {
			u := Filler
			if i >= fillers {
				u = Unit{PhyOffset: phy, Size: 1 + rng.Int31n(2000), TagsCode: rng.Int63()}
				phy = u.End()
			}
			u.Encode(data[i*UnitSize:])
		}
		what := fmt.Sprintf("seed %d round %d: %d units, %d fillers", seed, round, units, fillers)
		if units > 0 && rng.Intn(2) == 0 {
			at := rng.Intn(units) * UnitSize
			switch rng.Intn(3) {
			case 0:
				clear(data[at : at+UnitSize])
				what += fmt.Sprintf(", zero unit at %d", at)
			case 1:
				Unit{PhyOffset: 1, Size: 1}.Encode(data[at:])
				what += fmt.Sprintf(", backwards unit at %d", at)
			case 2:
				Unit{PhyOffset: -5, Size: 1}.Encode(data[at:])
				what += fmt.Sprintf(", invalid unit at %d", at)
			}
		}
		var segs []mmap.Segment
		for i := 0; i < nfiles; i++ {
			name := filepath.Join(dir, fmt.Sprintf("r%d-%s", round, mmap.FileName(int64(i)*fileSize)))
			if err := os.WriteFile(name, data[i*fileSize:(i+1)*fileSize], 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := mmap.Open(vfs.OS(), name, fileSize, mmap.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, ok := mmap.ReaderAt(f); !ok {
				t.Fatalf("%s: a real mapping without a pread path", name)
			}
			segs = append(segs, mmap.Segment{Start: int64(i) * fileSize, File: f})
		}
		st0 := scanState{fillersOK: true}
		end, st, err := scanSegments(segs, 0, st0)
		wantEnd, wantSt := scanMapped(segs, st0)
		if err != nil || end != wantEnd || st != wantSt {
			t.Fatalf("%s: through pread end %d %+v %v, through the mappings end %d %+v", what, end, st, err, wantEnd, wantSt)
		}
	}
}

// TestRecoverReadErrorCutsNothing: a queue file the file system cannot read
// fails the open with the read error; the files are left as they were.
func TestRecoverReadErrorCutsNothing(t *testing.T) {
	var failReads atomic.Bool
	fsys := vfs.WithInjector(vfs.OS(), vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind == vfs.OpRead && failReads.Load() {
			return fmt.Errorf("%w: EIO", vfs.ErrInjected)
		}
		return nil
	}))
	dir := t.TempDir()
	const fileSize = testUnitsPerFile * UnitSize
	s, err := Open(fsys, Config{Dir: dir, FileSize: fileSize})
	if err != nil {
		t.Fatal(err)
	}
	putN(t, mustQueue(t, s, "T", 0), 0, 12)
	s.Close()
	qdir := filepath.Join(dir, "T", "0")
	before := dirBytes(t, qdir)

	failReads.Store(true)
	if s, err := Open(fsys, Config{Dir: dir, FileSize: fileSize}); !errors.Is(err, vfs.ErrInjected) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("open with failing reads: %v, want the injected read error", err)
	}
	if after := dirBytes(t, qdir); !bytes.Equal(before, after) {
		t.Fatal("a failed recovery changed the queue files")
	}
	failReads.Store(false)
	s, err = Open(fsys, Config{Dir: dir, FileSize: fileSize})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkUnits(t, s.Get("T", 0), 0, 12)
}

// dirBytes is the concatenated contents of dir's files, in name order.
func dirBytes(t *testing.T, dir string) []byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var all []byte
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

// TestRecoverFromDurableUnits: with Config.Durable a queue whose last
// durable unit is in its last three files is scanned from that unit on: it
// ends where the units do (at a zero unit after it) and the units before it
// are not read again (a zeroed one goes unseen), and a durable count whose
// last unit is not a real one below DurableBelow falls back to the scan
// from the third-last file, which Recover does. Through pread (real files)
// and through the mappings (the in-memory twin).
func TestRecoverFromDurableUnits(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	const fileSize = testUnitsPerFile * UnitSize
	for round := 0; round < 60; round++ {
		fsys, dir := vfs.FS(vfs.NewMem()), "/cq"
		if round%2 == 0 {
			fsys, dir = vfs.OS(), t.TempDir()
		}
		n := int64(1 + rng.Intn(60))
		s, err := Open(fsys, Config{Dir: dir, FileSize: fileSize})
		if err != nil {
			t.Fatal(err)
		}
		putN(t, mustQueue(t, s, "T", 0), 0, n)
		if err := s.Flush(); err != nil { // the in-memory twin writes its files only then
			t.Fatal(err)
		}
		s.Close()
		// The last durable unit in the last three files: the scan from it
		// starts later than the one from the third-last file.
		files := (n + testUnitsPerFile - 1) / testUnitsPerFile
		lo := max(0, files-3) * testUnitsPerFile
		durable := lo + 1 + rng.Int63n(n-lo)
		below := unitN(n - 1).End()
		want := n
		what := fmt.Sprintf("seed %d round %d: %d units, %d durable", seed, round, n, durable)
		switch rng.Intn(5) {
		case 0: // a zero unit after the durable ones ends the queue there
			z := durable + rng.Int63n(n-durable+1)
			if z < n {
				zeroUnit(t, fsys, dir, fileSize, z)
				want = z
			}
			what += fmt.Sprintf(", unit %d zeroed", z)
		case 1: // the durable units point above the checkpoint: not durable
			below = unitN(durable-1).End() - 1
			want = -1
			what += ", last durable unit above DurableBelow"
		case 2: // the last durable unit is damaged: not durable
			zeroUnit(t, fsys, dir, fileSize, durable-1)
			want = -1
			what += ", last durable unit zeroed"
		case 3: // the units before the last durable one are not read again
			if durable-2 > lo {
				z := lo + 1 + rng.Int63n(durable-2-lo)
				zeroUnit(t, fsys, dir, fileSize, z)
				what += fmt.Sprintf(", durable unit %d zeroed (the scan from the third-last file would end there)", z)
			}
		}
		if want < 0 { // whatever the scan from the third-last file finds
			c := Config{Dir: dir + "-copy", FileSize: fileSize}
			copyDir(t, fsys, filepath.Join(dir, "T", "0"), filepath.Join(c.Dir, "T", "0"))
			ref, err := Open(fsys, c)
			if err != nil {
				t.Fatal(err)
			}
			want = ref.Get("T", 0).MaxOffset()
			ref.Close()
		}
		s, err = Open(fsys, Config{Dir: dir, FileSize: fileSize, DurableBelow: below,
			Durable: func(topic string, id int32) int64 { return durable }})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		q := s.Get("T", 0)
		if got := q.MaxOffset(); got != want {
			t.Fatalf("%s: max offset %d, want %d", what, got, want)
		}
		if want > 0 && q.MaxPhyOffset() != unitN(want-1).End() {
			t.Fatalf("%s: maxPhy %d, want %d", what, q.MaxPhyOffset(), unitN(want-1).End())
		}
		s.Close()
	}
}

// zeroUnit zeroes unit i of queue T/0 under dir.
func zeroUnit(t *testing.T, fsys vfs.FS, dir string, fileSize, i int64) {
	t.Helper()
	start := i * UnitSize / fileSize * fileSize
	name := filepath.Join(dir, "T", "0", mmap.FileName(start))
	b := readFile(t, fsys, name)
	clear(b[i*UnitSize-start:][:UnitSize])
	writeFile(t, fsys, name, b)
}

// copyDir copies the files of src into dst.
func copyDir(t *testing.T, fsys vfs.FS, src, dst string) {
	t.Helper()
	if err := fsys.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	names, err := fsys.List(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		f, err := fsys.Create(filepath.Join(dst, name))
		if err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
		writeFile(t, fsys, filepath.Join(dst, name), readFile(t, fsys, filepath.Join(src, name)))
	}
}
