package consumequeue

import (
	"errors"
	"math/rand"
	"path/filepath"
	"testing"

	"github.com/raftmq/raftmq/mmap"
	"github.com/raftmq/raftmq/vfs"
)

const tfs = testUnitsPerFile * UnitSize

func TestPutGetRange(t *testing.T) {
	s := openTest(t, vfs.NewMem(), tfs)
	q := mustQueue(t, s, "T", 0)
	putN(t, q, 0, 23)
	checkUnits(t, q, 0, 23)
	got, err := q.Range(3, 9, nil)
	if err != nil || len(got) != 9 || got[0] != unitN(3) || got[8] != unitN(11) {
		t.Fatalf("range = %v, %v", got, err)
	}
	got, err = q.Range(20, 100, got[:0])
	if err != nil || len(got) != 3 || got[2] != unitN(22) {
		t.Fatalf("range tail = %v, %v", got, err)
	}
	if got, err = q.Range(23, 10, nil); err != nil || len(got) != 0 {
		t.Fatalf("range at max = %v, %v", got, err)
	}
	if _, err = q.Range(24, 10, nil); !errors.Is(err, ErrOffset) {
		t.Fatalf("range past max: %v", err)
	}
	for _, off := range []int64{-1, 23, 1000} {
		if _, err := q.Get(off); !errors.Is(err, ErrOffset) {
			t.Fatalf("get %d: %v", off, err)
		}
	}
	if n := len(mustSegments(t, q)); n != 5 {
		t.Fatalf("%d files, want 5", n)
	}
}

func mustSegments(t testing.TB, q *Queue) []mmap.Segment {
	q.mu.RLock()
	defer q.mu.RUnlock()
	return q.mq.Segments()
}

func TestPutIdempotentGapBadUnit(t *testing.T) {
	s := openTest(t, vfs.NewMem(), tfs)
	q := mustQueue(t, s, "T", 1)
	putN(t, q, 0, 7)
	for i := int64(0); i < 7; i++ { // re-dispatch: skipped
		if err := q.Put(i, unitN(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Put(3, unitN(9)); err != nil { // stale queue offset: skipped
		t.Fatal(err)
	}
	if err := q.Put(7, unitN(5)); err != nil { // already-built phy: skipped
		t.Fatal(err)
	}
	if err := q.Put(9, unitN(9)); !errors.Is(err, ErrGap) {
		t.Fatalf("gap: %v", err)
	}
	if err := q.Put(7, Unit{PhyOffset: unitN(6).End() - 1, Size: 10}); !errors.Is(err, ErrBadUnit) {
		t.Fatalf("overlap: %v", err)
	}
	for _, u := range []Unit{Filler, {PhyOffset: 1000, Size: 0}, {PhyOffset: -1, Size: 5}} {
		if err := q.Put(7, u); !errors.Is(err, ErrBadUnit) {
			t.Fatalf("put %+v: %v", u, err)
		}
	}
	if err := q.Put(-1, unitN(7)); !errors.Is(err, ErrOffset) {
		t.Fatal(err)
	}
	checkUnits(t, q, 0, 7)
}

func TestStartAtNonZero(t *testing.T) {
	fs := vfs.NewMem()
	s := openTest(t, fs, tfs)
	q := mustQueue(t, s, "T", 0)
	putN(t, q, 12, 16)
	checkUnits(t, q, 12, 16)
	segs := mustSegments(t, q)
	if segs[0].Start != 10*UnitSize {
		t.Fatalf("first file at %d", segs[0].Start)
	}
	if u := decodeUnit(segs[0].File.Bytes()[UnitSize:]); !u.IsFiller() {
		t.Fatalf("unit 11 = %+v, want filler", u)
	}
	if _, err := q.Get(11); !errors.Is(err, ErrOffset) {
		t.Fatal(err)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openTest(t, fs, tfs)
	checkUnits(t, s.Get("T", 0), 12, 16)
}

func TestRestartEmptyQueue(t *testing.T) {
	s := openTest(t, vfs.NewMem(), tfs)
	q := mustQueue(t, s, "T", 0)
	putN(t, q, 3, 4)
	if err := q.TruncateAtPhy(0); err != nil {
		t.Fatal(err)
	}
	checkUnits(t, q, 3, 3)
	if err := q.Put(5, unitN(5)); !errors.Is(err, ErrGap) { // fillers remain: not empty
		t.Fatalf("gap after truncate: %v", err)
	}
	putN(t, q, 3, 6)
	checkUnits(t, q, 3, 6)
}

func TestReopenAndDirtyTail(t *testing.T) {
	fs := vfs.NewMem()
	s := openTest(t, fs, tfs)
	q := mustQueue(t, s, "T", 2)
	putN(t, q, 0, 13)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if q.FlushedOffset() != 13 {
		t.Fatalf("flushed %d", q.FlushedOffset())
	}
	s.Close()
	// Dirty bytes after the end: an overlapping unit then junk.
	path := filepath.Join("/cq", "T", "2", mmap.FileName(10*UnitSize))
	b := readFile(t, fs, path)
	Unit{PhyOffset: 1249, Size: 10}.Encode(b[3*UnitSize:])
	b[4*UnitSize+7] = 0xff
	writeFile(t, fs, path, b)
	s = openTest(t, fs, tfs)
	q = s.Get("T", 2)
	checkUnits(t, q, 0, 13)
	if b := readFile(t, fs, path); !allZero(b[3*UnitSize:]) {
		t.Fatalf("dirty tail not zeroed: %x", b)
	}
	putN(t, q, 13, 20)
	checkUnits(t, q, 0, 20)
}

func TestCrashKeepsPrefix(t *testing.T) {
	r := rand.New(rand.NewSource(testSeed(t)))
	for iter := 0; iter < 20; iter++ {
		fs := vfs.NewMem()
		s := openTest(t, fs, tfs)
		q := mustQueue(t, s, "T", 0)
		flushed := int64(r.Intn(12))
		total := flushed + int64(r.Intn(12))
		putN(t, q, 0, flushed)
		if err := q.Flush(); err != nil {
			t.Fatal(err)
		}
		putN(t, q, flushed, total)
		mode := vfs.CrashMode(r.Intn(3))
		clone := fs.CrashClone(vfs.CrashOptions{Mode: mode, Rand: r, Reorder: r.Intn(2) == 0})
		s2 := openTest(t, clone, tfs)
		q2 := s2.Get("T", 0)
		if q2 == nil {
			if flushed > 0 {
				t.Fatalf("iter %d: queue lost", iter)
			}
			continue
		}
		max := q2.MaxOffset()
		t.Logf("iter %d mode %v flushed %d total %d max %d segs %d", iter, mode, flushed, total, max, len(mustSegments(t, q2)))
		if max < flushed || max > total || (mode == vfs.DropUnsynced && max != flushed) {
			t.Fatalf("iter %d mode %v: max %d, flushed %d total %d", iter, mode, max, flushed, total)
		}
		checkUnits(t, q2, 0, max)
	}
}

func TestTruncateAtPhy(t *testing.T) {
	fs := vfs.NewMem()
	s := openTest(t, fs, tfs)
	q := mustQueue(t, s, "T", 0)
	putN(t, q, 0, 23)
	if err := q.TruncateAtPhy(unitN(11).PhyOffset - 50); err != nil {
		t.Fatal(err)
	}
	checkUnits(t, q, 0, 11)
	if n := len(mustSegments(t, q)); n != 3 {
		t.Fatalf("%d files after truncate", n)
	}
	if err := q.TruncateAtPhy(unitN(20).PhyOffset); err != nil { // beyond: no-op
		t.Fatal(err)
	}
	checkUnits(t, q, 0, 11)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openTest(t, fs, tfs)
	q = s.Get("T", 0)
	checkUnits(t, q, 0, 11)
	putN(t, q, 11, 15)
	checkUnits(t, q, 0, 15)
	if err := q.TruncateAtPhy(unitN(10).PhyOffset); err != nil { // at a file boundary
		t.Fatal(err)
	}
	checkUnits(t, q, 0, 10)
	putN(t, q, 10, 12)
	checkUnits(t, q, 0, 12)
}

func TestDeleteBelowPhy(t *testing.T) {
	fs := vfs.NewMem()
	s := openTest(t, fs, tfs)
	q := mustQueue(t, s, "T", 0)
	putN(t, q, 0, 23)
	n, err := q.DeleteBelowPhy(1250)
	if err != nil || n != 2 {
		t.Fatalf("deleted %d, %v", n, err)
	}
	checkUnits(t, q, 13, 23)
	if _, err := q.Get(12); !errors.Is(err, ErrOffset) {
		t.Fatal(err)
	}
	if n, _ = q.DeleteBelowPhy(100_000); n != 2 { // never the last file
		t.Fatalf("deleted %d", n)
	}
	checkUnits(t, q, 23, 23)
	putN(t, q, 23, 25)
	checkUnits(t, q, 23, 25)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openTest(t, fs, tfs)
	checkUnits(t, s.Get("T", 0), 20, 25) // reopen: min is the first file's start
}

func TestOffsetByTime(t *testing.T) {
	s := openTest(t, vfs.NewMem(), tfs)
	q := mustQueue(t, s, "T", 0)
	putN(t, q, 4, 12)
	// store times by offset 4..11: 10 20 20 20 30 40 40 50
	times := map[int64]int64{4: 10, 5: 20, 6: 20, 7: 20, 8: 30, 9: 40, 10: 40, 11: 50}
	storeTime := func(phy int64) (int64, error) { return times[phy/100], nil }
	for _, c := range []struct {
		ts           int64
		lower, upper int64
	}{
		{20, 5, 7}, {25, 8, 7}, {40, 9, 10}, {5, 4, 0}, {10, 4, 4}, {50, 11, 11}, {60, 12, 11},
	} {
		lo, err := q.OffsetByTime(c.ts, false, storeTime)
		if err != nil || lo != c.lower {
			t.Errorf("LOWER %d = %d, %v; want %d", c.ts, lo, err, c.lower)
		}
		up, err := q.OffsetByTime(c.ts, true, storeTime)
		if err != nil || up != c.upper {
			t.Errorf("UPPER %d = %d, %v; want %d", c.ts, up, err, c.upper)
		}
	}
	boom := errors.New("boom")
	if _, err := q.OffsetByTime(1, false, func(int64) (int64, error) { return 0, boom }); !errors.Is(err, boom) {
		t.Fatal(err)
	}
}

// TestConcurrentReaders: readers see a consistent prefix while one writer
// appends (run with -race).
func TestConcurrentReaders(t *testing.T) {
	s := openTest(t, vfs.NewMem(), tfs)
	q := mustQueue(t, s, "T", 0)
	done := make(chan error, 2)
	for r := 0; r < 2; r++ {
		go func() {
			var dst []Unit
			for q.MaxOffset() < 200 {
				var err error
				if dst, err = q.Range(0, 50, dst[:0]); err != nil {
					done <- err
					return
				}
				for i, u := range dst {
					if u != unitN(int64(i)) {
						done <- errors.New("torn read")
						return
					}
				}
			}
			done <- nil
		}()
	}
	putN(t, q, 0, 200)
	for r := 0; r < 2; r++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// A queue whose offsets run past its files (a corrupt state: MaxOffset is
// above the last unit any file holds) answers ErrCorrupt instead of
// panicking, and its own maintenance treats the missing units as fillers.
func TestMissingFileIsCorruptNotPanic(t *testing.T) {
	s := openTest(t, vfs.NewMem(), tfs)
	q := mustQueue(t, s, "T", 0)
	putN(t, q, 0, 7)
	q.mu.Lock()
	q.maxOffset = 3 * testUnitsPerFile // no file holds the units past 7's file
	q.mu.Unlock()
	off := int64(2 * testUnitsPerFile)
	if _, err := q.Get(off); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("get %d: %v, want ErrCorrupt", off, err)
	}
	if _, err := q.Range(0, 3*testUnitsPerFile, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("range over the missing file: %v, want ErrCorrupt", err)
	}
	if err := q.TruncateAtPhy(1 << 40); err != nil {
		t.Fatalf("truncate: %v", err)
	}
}
