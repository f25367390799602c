package mmap

import (
	"bytes"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/raftmq/raftmq/vfs"
)

const qsize = 8192

func openQ(t *testing.T, fsys vfs.FS, dir string, alloc *Allocator) *Queue {
	t.Helper()
	q, err := OpenQueue(fsys, QueueConfig{Dir: dir, FileSize: qsize, Allocator: alloc})
	must(t, err)
	return q
}

func starts(q *Queue) []int64 {
	var s []int64
	for _, seg := range q.Segments() {
		s = append(s, seg.Start)
	}
	return s
}

// fill writes a byte pattern over [from, to) of the queue and moves the
// write watermark.
func fill(t *testing.T, q *Queue, from, to int64, b byte) {
	t.Helper()
	for off := from; off < to; {
		seg, ok := q.Find(off)
		if !ok {
			t.Fatalf("no segment for %d", off)
		}
		end := min(to, seg.End())
		copy(seg.File.Bytes()[off-seg.Start:end-seg.Start], bytes.Repeat([]byte{b}, int(end-off)))
		off = end
	}
	q.SetWriteOffset(to)
}

func TestQueueRollFindReopen(t *testing.T) {
	for _, im := range impls[1:] { // heap-os and heap-mem; mmap-os below
		t.Run(im.name, func(t *testing.T) { testQueueRollFindReopen(t, im) })
	}
	t.Run("mmap-os", func(t *testing.T) { testQueueRollFindReopen(t, impls[0]) })
}

func testQueueRollFindReopen(t *testing.T, im impl) {
	fsys, dir := im.fs(t)
	dir = filepath.Join(dir, "sub", "queue") // OpenQueue creates it
	q := openQ(t, fsys, dir, nil)
	if !q.Empty() || q.MinOffset() != 0 || q.WriteOffset() != 0 {
		t.Fatal("new queue not empty")
	}
	if _, ok := q.Last(); ok {
		t.Fatal("Last on empty queue")
	}
	for i := 0; i < 3; i++ {
		seg, err := q.Roll()
		must(t, err)
		if seg.Start != int64(i)*qsize || seg.End() != seg.Start+qsize {
			t.Fatalf("roll %d at %d", i, seg.Start)
		}
	}
	fill(t, q, 100, 2*qsize+5, 7)
	must(t, q.Flush(1<<40)) // clamped to WriteOffset
	if q.FlushedOffset() != 2*qsize+5 {
		t.Fatalf("FlushedOffset = %d", q.FlushedOffset())
	}
	for _, c := range []struct {
		off   int64
		start int64
		ok    bool
	}{{0, 0, true}, {qsize - 1, 0, true}, {qsize, qsize, true}, {3*qsize - 1, 2 * qsize, true}, {3 * qsize, 0, false}, {-1, 0, false}} {
		seg, ok := q.Find(c.off)
		if ok != c.ok || (ok && seg.Start != c.start) {
			t.Fatalf("Find(%d) = %d,%v", c.off, seg.Start, ok)
		}
	}
	if _, err := q.Create(5 * qsize); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("Create with a gap: %v", err)
	}
	must(t, q.Close())
	if _, err := q.Roll(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Roll after Close: %v", err)
	}
	q = openQ(t, fsys, dir, nil)
	defer q.Close()
	if !slices.Equal(starts(q), []int64{0, qsize, 2 * qsize}) || q.WriteOffset() != 3*qsize || q.FlushedOffset() != 3*qsize {
		t.Fatalf("reopened: %v w=%d f=%d", starts(q), q.WriteOffset(), q.FlushedOffset())
	}
	seg, _ := q.Find(qsize + 10)
	if seg.File.Bytes()[10] != 7 {
		t.Fatal("data lost across reopen")
	}
}

func TestQueueEmptyStart(t *testing.T) {
	fsys, dir := memDir(t)
	q := openQ(t, fsys, dir, nil)
	defer q.Close()
	q.SetWriteOffset(3*qsize + 100)
	seg, err := q.Roll()
	must(t, err)
	if seg.Start != 3*qsize || q.MinOffset() != 3*qsize {
		t.Fatalf("empty roll at %d", seg.Start)
	}
	q2 := openQ(t, fsys, filepath.Join(dir, "b"), nil)
	defer q2.Close()
	if _, err := q2.Create(100); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("unaligned Create: %v", err)
	}
	seg, err = q2.Create(2 * qsize)
	must(t, err)
	if q2.WriteOffset() != 2*qsize || q2.FlushedOffset() != 2*qsize {
		t.Fatalf("watermarks after first Create: %d %d", q2.WriteOffset(), q2.FlushedOffset())
	}
	if _, err := q2.Create(seg.End()); err != nil {
		t.Fatal(err)
	}
}

func TestQueueBadFiles(t *testing.T) {
	cases := map[string][]string{
		"name":  {FileName(0), "junk"},
		"gap":   {FileName(0), FileName(2 * qsize)},
		"align": {FileName(100)},
	}
	wantErr := map[string]error{"name": ErrFileName, "gap": ErrNotContiguous, "align": ErrNotContiguous}
	for name, files := range cases {
		fsys, dir := memDir(t)
		for _, f := range files {
			mf, err := Open(fsys, filepath.Join(dir, f), qsize, Options{})
			must(t, err)
			must(t, mf.Close())
		}
		if _, err := OpenQueue(fsys, QueueConfig{Dir: dir, FileSize: qsize}); !errors.Is(err, wantErr[name]) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	fsys, dir := memDir(t)
	mf, err := Open(fsys, filepath.Join(dir, FileName(0)), qsize/2, Options{})
	must(t, err)
	must(t, mf.Close())
	if _, err := OpenQueue(fsys, QueueConfig{Dir: dir, FileSize: qsize}); !errors.Is(err, ErrFileSize) {
		t.Fatalf("size: %v", err)
	}
}

func TestQueueTruncateDirty(t *testing.T) {
	for _, im := range impls {
		t.Run(im.name, func(t *testing.T) {
			fsys, dir := im.fs(t)
			q := openQ(t, fsys, dir, nil)
			for i := 0; i < 3; i++ {
				_, err := q.Roll()
				must(t, err)
			}
			fill(t, q, 0, 2*qsize+300, 9)
			must(t, q.Flush(q.WriteOffset()))
			cut := int64(qsize + 1000)
			must(t, q.TruncateDirty(cut))
			if !slices.Equal(starts(q), []int64{0, qsize}) || q.WriteOffset() != cut || q.FlushedOffset() != cut {
				t.Fatalf("after truncate: %v w=%d f=%d", starts(q), q.WriteOffset(), q.FlushedOffset())
			}
			must(t, q.Close())
			q = openQ(t, fsys, dir, nil) // zeros must be durable
			defer q.Close()
			if !slices.Equal(starts(q), []int64{0, qsize}) {
				t.Fatalf("reopened after truncate: %v", starts(q))
			}
			seg, _ := q.Find(qsize)
			b := seg.File.Bytes()
			if !bytes.Equal(b[:1000], bytes.Repeat([]byte{9}, 1000)) {
				t.Fatal("truncate damaged bytes below the cut")
			}
			if !bytes.Equal(b[1000:], make([]byte, qsize-1000)) {
				t.Fatal("bytes after the cut are not zero")
			}
		})
	}
}

// TestTruncateDirtyZeroesOnlyWritten: bytes past the old WriteOffset are
// left alone (they were never written by the queue's user).
func TestTruncateDirtyZeroesOnlyWritten(t *testing.T) {
	m := vfs.NewMem()
	q := openQ(t, m, "/q", nil)
	defer q.Close()
	seg, err := q.Roll()
	must(t, err)
	seg.File.Bytes()[5000] = 0xAA // beyond WriteOffset, unflushed marker
	fill(t, q, 0, 2000, 1)
	ops := m.OpCount()
	must(t, q.TruncateDirty(1000))
	if seg.File.Bytes()[5000] != 0xAA {
		t.Fatal("zeroed past the old WriteOffset")
	}
	if !bytes.Equal(seg.File.Bytes()[1000:2000], make([]byte, 1000)) {
		t.Fatal("written tail not zeroed")
	}
	if m.OpCount()-ops != 2 { // one WriteAt + one Sync of [1000, 2000)
		t.Fatalf("TruncateDirty ran %d fs ops", m.OpCount()-ops)
	}
	must(t, q.TruncateDirty(1<<20)) // beyond everything: no change
	if q.WriteOffset() != 1000 {
		t.Fatalf("WriteOffset raised to %d", q.WriteOffset())
	}
}

func TestQueueDeleteOldest(t *testing.T) {
	fsys, dir := memDir(t)
	q := openQ(t, fsys, dir, nil)
	defer q.Close()
	for i := 0; i < 5; i++ {
		_, err := q.Roll()
		must(t, err)
	}
	n, err := q.DeleteOldest(2, func(Segment) bool { return false })
	must(t, err)
	if n != 2 || !slices.Equal(starts(q), []int64{2 * qsize, 3 * qsize, 4 * qsize}) {
		t.Fatalf("deleted %d: %v", n, starts(q))
	}
	// Stops at the first kept file even if later ones are deletable.
	n, err = q.DeleteOldest(10, func(s Segment) bool { return s.Start == 2*qsize })
	must(t, err)
	if n != 0 {
		t.Fatalf("deleted past a kept file: %d", n)
	}
	n, err = q.DeleteOldest(10, func(Segment) bool { return false })
	must(t, err)
	if n != 2 || !slices.Equal(starts(q), []int64{4 * qsize}) {
		t.Fatalf("never-the-last: deleted %d: %v", n, starts(q))
	}
	names, _ := fsys.List(dir)
	if !slices.Equal(names, []string{FileName(4 * qsize)}) {
		t.Fatalf("files on disk: %v", names)
	}
	if _, ok := q.Find(0); ok {
		t.Fatal("Find returns a deleted segment")
	}
}

func TestQueueFlushCrash(t *testing.T) {
	m := vfs.NewMem()
	q := openQ(t, m, "/q", nil)
	for i := 0; i < 2; i++ {
		_, err := q.Roll()
		must(t, err)
	}
	fill(t, q, 0, qsize+500, 3)
	must(t, q.Flush(qsize+100))
	c := m.CrashClone(vfs.CrashOptions{Mode: vfs.DropUnsynced})
	must(t, q.Close())
	q = openQ(t, c, "/q", nil)
	defer q.Close()
	seg, _ := q.Find(qsize)
	b := seg.File.Bytes()
	if !bytes.Equal(b[:100], bytes.Repeat([]byte{3}, 100)) || b[100] != 0 {
		t.Fatalf("crash image: flushed bytes lost or unflushed kept: %v", b[98:102])
	}
}

// TestQueueConcurrentReaders runs Find/Segments/watermark readers against a
// writer that rolls, writes and deletes (run with -race).
func TestQueueConcurrentReaders(t *testing.T) {
	fsys, dir := memDir(t)
	q := openQ(t, fsys, dir, nil)
	defer q.Close()
	_, err := q.Roll()
	must(t, err)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				w := q.WriteOffset()
				if seg, ok := q.Find(w - 1); ok && (seg.Start > w-1 || seg.End() <= w-1) {
					t.Errorf("Find(%d) returned [%d,%d)", w-1, seg.Start, seg.End())
				}
				_ = q.Segments()
				_, _ = q.Last()
				_ = q.FlushedOffset()
			}
		}()
	}
	for i := 0; i < 20; i++ {
		q.SetWriteOffset(q.WriteOffset() + qsize)
		if _, err := q.Roll(); err != nil {
			t.Error(err)
			break
		}
		must(t, q.Flush(q.WriteOffset()))
	}
	close(stop)
	wg.Wait()
}
