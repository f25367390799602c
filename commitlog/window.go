package commitlog

import (
	"fmt"
	"io"

	"github.com/raftmq/raftmq/mmap"
)

// chunkSize is the unit a scanner reads: segments are read in chunks that
// start at multiples of it, one pread each. Small enough that what was just
// read is still in the core's cache when it is checked: against reading and
// CRC32C-ing 1 GiB of segments (store's BenchmarkRecoveryScanPaired), the
// scan ran at 0.84-0.92 of it with 256 KiB chunks, 0.76-0.83 with 1 MiB and
// 0.80-0.83 with 4 MiB.
const chunkSize = 256 << 10

// window is a scanner's copy of the segment bytes it verifies.
//
// Verifying through a fresh mapping costs a page fault for every 4 KiB (at
// restart no page of a segment is mapped yet): on the machines measured,
// CRC32C through fresh mappings runs at about a quarter of the speed of
// pread into a buffer plus CRC32C. So the scanner checks frames, CRCs and
// records in a copy read with pread, and hands out entries that alias the
// mapping at the same offsets: a MAP_SHARED mapping and the file read
// through its descriptor are the same page cache, and nothing writes the
// log while it is scanned (recovery runs before any writer; verify reads
// below the write offset). Reading ahead on another goroutine was measured
// slower: the checks then read the copy from another core's cache.
type window struct {
	buf   []byte // the chunk: bytes [start, start+len(buf)) of segment seg
	seg   int    // -1: none
	start int64
	join  []byte // a view across chunks is copied here
	small []byte // exact's bytes

	size    int64 // bytes per chunk, a power of two; 0: chunkSize
	noPread bool  // check through the mapping (tests compare the two)
}

func (w *window) holds(si int, from, to int64) bool {
	return w.seg == si && from >= w.start && to <= w.start+int64(len(w.buf))
}

// view returns the bytes [from, from+n) of segment si (seg) for checking;
// from+n must not pass the segment's end. The bytes are valid until the next
// call. Files that cannot be read with pread are checked through their
// mapping.
func (w *window) view(si int, seg mmap.Segment, from int64, n int) ([]byte, error) {
	r, ok := mmap.ReaderAt(seg.File)
	if !ok || w.noPread {
		rel := from - seg.Start
		return seg.File.Bytes()[rel : rel+int64(n) : rel+int64(n)], nil
	}
	to := from + int64(n)
	if !w.holds(si, from, from+1) {
		if err := w.load(r, si, seg, from); err != nil {
			return nil, err
		}
	}
	if w.holds(si, from, to) {
		rel := from - w.start
		return w.buf[rel : rel+int64(n) : rel+int64(n)], nil
	}
	// The range runs on into later chunks: copy it together.
	if cap(w.join) < n {
		w.join = make([]byte, n)
	}
	out := w.join[:n:n]
	for done := 0; done < n; {
		if done > 0 {
			if err := w.load(r, si, seg, from+int64(done)); err != nil {
				return nil, err
			}
		}
		done += copy(out[done:], w.buf[from+int64(done)-w.start:])
	}
	return out, nil
}

// load reads the chunk of segment si that holds from.
func (w *window) load(r io.ReaderAt, si int, seg mmap.Segment, from int64) error {
	size := w.chunk()
	start := seg.Start + (from-seg.Start)&^(size-1)
	if int64(cap(w.buf)) < size {
		w.buf = make([]byte, size)
	}
	buf := w.buf[:min(size, seg.End()-start)]
	w.seg = -1
	if err := readFull(r, seg, buf, start); err != nil {
		return err
	}
	w.buf, w.seg, w.start = buf, si, start
	return nil
}

// chunk is the window's read unit.
func (w *window) chunk() int64 {
	if w.size == 0 {
		return chunkSize
	}
	return w.size
}

// exact is view for a few bytes of a large record: where the chunk does not
// hold them, it reads just [from, from+n) (into small), not the chunk around
// them, and leaves the chunk as it was. The bytes are valid until the next
// call of exact.
func (w *window) exact(si int, seg mmap.Segment, from int64, n int) ([]byte, error) {
	r, ok := mmap.ReaderAt(seg.File)
	if !ok || w.noPread || w.holds(si, from, from+int64(n)) {
		return w.view(si, seg, from, n)
	}
	if cap(w.small) < n {
		w.small = make([]byte, n)
	}
	out := w.small[:n:n]
	if err := readFull(r, seg, out, from); err != nil {
		return nil, err
	}
	return out, nil
}

// readFull reads len(buf) bytes of seg at the log offset at; an error
// matches ErrRead.
func readFull(r io.ReaderAt, seg mmap.Segment, buf []byte, at int64) error {
	got, err := r.ReadAt(buf, at-seg.Start)
	if err == io.EOF {
		err = nil
		if got < len(buf) { // a file shorter than its mapping: not a clean end
			err = io.ErrUnexpectedEOF
		}
	}
	if err != nil {
		return fmt.Errorf("%w: %s at %d: %w", ErrRead, seg.File.Name(), at, err)
	}
	return nil
}
