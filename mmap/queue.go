package mmap

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/raftmq/raftmq/vfs"
)

// Queue is an ordered list of equal-size mapped files. It is not safe for
// concurrent mutation; readers may call Find concurrently with one writer.
// The queue tracks two watermarks that its user sets: WriteOffset (end of
// written data) and FlushedOffset (end of durable data).
//
// Concurrency: the segment list is an immutable snapshot swapped
// atomically, and the watermarks are atomics, so Find, Segments, Last,
// Empty, MinOffset, WriteOffset and FlushedOffset may run concurrently with
// the writer. Flush may run in its own goroutine too (a flush service): it
// is serialised with TruncateDirty and DeleteOldest, the mutators that close
// files. A Segment obtained by a reader stays valid only until the writer
// deletes it; coordinating that is the user's job.
type Queue struct {
	fs  vfs.FS
	cfg QueueConfig
	log hclog.Logger

	segs    atomic.Pointer[[]Segment] // immutable, oldest first
	write   atomic.Int64
	flushed atomic.Int64
	closed  atomic.Bool

	flushMu sync.Mutex // serialises Flush with TruncateDirty/DeleteOldest/Close
}

// OpenQueue loads every file in cfg.Dir (creating the directory), checking
// names (ErrFileName) and sizes (ErrFileSize). A loaded queue has
// WriteOffset = FlushedOffset = end of the last file until the user
// (recovery) calls TruncateDirty or SetWriteOffset.
//
// Files must start at multiples of FileSize and follow each other without
// gaps (ErrNotContiguous). Leftovers of an interrupted create
// ("<20 digits>.tmp") are deleted.
func OpenQueue(fs vfs.FS, cfg QueueConfig) (*Queue, error) {
	if cfg.FileSize <= 0 || cfg.FileSize > maxFileSize {
		return nil, fmt.Errorf("%w: queue %s: file size %d", ErrOutOfRange, cfg.Dir, cfg.FileSize)
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	q := &Queue{fs: fs, cfg: cfg, log: cfg.Logger}
	if err := fs.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("mmap: queue %s: %w", cfg.Dir, err)
	}
	starts, err := q.scan()
	if err != nil {
		return nil, err
	}
	segs, err := q.load(starts)
	if err != nil {
		return nil, err
	}
	q.segs.Store(&segs)
	if len(segs) > 0 {
		end := segs[len(segs)-1].End()
		q.write.Store(end)
		q.flushed.Store(end)
	}
	return q, nil
}

// scan lists the directory and returns the start offsets, checked.
func (q *Queue) scan() ([]int64, error) {
	names, err := q.fs.List(q.cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("mmap: queue %s: %w", q.cfg.Dir, err)
	}
	var starts []int64
	for _, name := range names {
		if base, ok := strings.CutSuffix(name, tmpSuffix); ok {
			if _, err := ParseFileName(base); err == nil {
				q.log.Warn("removing unfinished file", "path", q.path(name))
				if err := q.fs.Remove(q.path(name)); err != nil {
					return nil, fmt.Errorf("mmap: queue %s: %w", q.cfg.Dir, err)
				}
				continue
			}
		}
		start, err := ParseFileName(name)
		if err != nil {
			return nil, fmt.Errorf("queue %s: %w", q.cfg.Dir, err)
		}
		if err := q.checkNext(starts, start); err != nil {
			return nil, err
		}
		starts = append(starts, start)
	}
	return starts, nil
}

// checkNext verifies start may follow the files in starts.
func (q *Queue) checkNext(starts []int64, start int64) error {
	size := q.cfg.FileSize
	if start%size != 0 || (len(starts) > 0 && start != starts[len(starts)-1]+size) {
		return fmt.Errorf("%w: %s after %d files", ErrNotContiguous, q.path(FileName(start)), len(starts))
	}
	return nil
}

// load opens every file; on error it closes what it opened.
func (q *Queue) load(starts []int64) ([]Segment, error) {
	segs := make([]Segment, 0, len(starts))
	for _, start := range starts {
		f, err := Open(q.fs, q.path(FileName(start)), q.cfg.FileSize, Options{Random: q.cfg.Random})
		if err != nil {
			closeAll(segs)
			return nil, err
		}
		segs = append(segs, Segment{Start: start, File: f})
	}
	return segs, nil
}

func closeAll(segs []Segment) error {
	var errs []error
	for _, s := range segs {
		errs = append(errs, s.File.Close())
	}
	return errors.Join(errs...)
}

func (q *Queue) path(name string) string { return filepath.Join(q.cfg.Dir, name) }

func (q *Queue) list() []Segment { return *q.segs.Load() }

func (q *Queue) publish(segs []Segment) { q.segs.Store(&segs) }

// FileSize is the configured size of every file.
func (q *Queue) FileSize() int64 { return q.cfg.FileSize }

// Segments returns the files oldest first (a copy of the list).
func (q *Queue) Segments() []Segment { return append([]Segment(nil), q.list()...) }

// Empty reports whether the queue has no files.
func (q *Queue) Empty() bool { return len(q.list()) == 0 }

// MinOffset is the start of the first file (0 when empty).
func (q *Queue) MinOffset() int64 {
	if segs := q.list(); len(segs) > 0 {
		return segs[0].Start
	}
	return 0
}

// WriteOffset is the end of written data.
func (q *Queue) WriteOffset() int64 { return q.write.Load() }

// SetWriteOffset moves the write watermark (the user wrote into Bytes()).
func (q *Queue) SetWriteOffset(off int64) { q.write.Store(off) }

// FlushedOffset is the end of durable data.
func (q *Queue) FlushedOffset() int64 { return q.flushed.Load() }

// Unflush lowers FlushedOffset to at most off, so the next Flush syncs from
// there: for bytes the queue's owner wrote again (or found written by an
// earlier process that may never have synced them) below the watermark.
func (q *Queue) Unflush(off int64) {
	q.flushMu.Lock()
	defer q.flushMu.Unlock()
	q.flushed.Store(min(q.flushed.Load(), max(off, 0)))
}

// Find returns the segment holding off (Start <= off < End).
func (q *Queue) Find(off int64) (Segment, bool) {
	segs := q.list()
	if len(segs) == 0 || off < segs[0].Start {
		return Segment{}, false
	}
	i := (off - segs[0].Start) / q.cfg.FileSize
	if i >= int64(len(segs)) {
		return Segment{}, false
	}
	return segs[i], true
}

// Last returns the newest segment.
func (q *Queue) Last() (Segment, bool) {
	segs := q.list()
	if len(segs) == 0 {
		return Segment{}, false
	}
	return segs[len(segs)-1], true
}

// Create adds a new segment starting at start, which must be the end of the
// last segment or, for an empty queue, any multiple of FileSize. When the
// queue was empty, watermarks below start are raised to start.
func (q *Queue) Create(start int64) (Segment, error) {
	if err := q.checkCreate(start); err != nil {
		return Segment{}, err
	}
	f, err := Open(q.fs, q.path(FileName(start)), q.cfg.FileSize, Options{PreTouch: q.cfg.PreTouch, Random: q.cfg.Random})
	if err != nil {
		return Segment{}, err
	}
	return q.add(start, f), nil
}

func (q *Queue) checkCreate(start int64) error {
	if q.closed.Load() {
		return fmt.Errorf("%w: queue %s", ErrClosed, q.cfg.Dir)
	}
	segs := q.list()
	ok := start >= 0 && start%q.cfg.FileSize == 0
	if len(segs) > 0 {
		ok = start == segs[len(segs)-1].End()
	}
	if !ok {
		return fmt.Errorf("%w: queue %s: cannot create a file at %d", ErrOutOfRange, q.cfg.Dir, start)
	}
	return nil
}

// add appends a segment and publishes the new list.
func (q *Queue) add(start int64, f File) Segment {
	old := q.list()
	if len(old) == 0 {
		raise(&q.write, start)
		raise(&q.flushed, start)
	}
	seg := Segment{Start: start, File: f}
	segs := make([]Segment, len(old), len(old)+1)
	copy(segs, old)
	q.publish(append(segs, seg))
	q.log.Debug("segment added", "path", f.Name())
	return seg
}

func raise(v *atomic.Int64, to int64) {
	if v.Load() < to {
		v.Store(to)
	}
}

// Roll adds the segment that follows the last one (at 0 for an empty queue
// whose WriteOffset is 0, else at WriteOffset rounded down to FileSize),
// taking it from the allocator when there is one.
func (q *Queue) Roll() (Segment, error) {
	start := q.write.Load()
	start -= start % q.cfg.FileSize
	if last, ok := q.Last(); ok {
		start = last.End()
	}
	if q.cfg.Allocator == nil {
		return q.Create(start)
	}
	if err := q.checkCreate(start); err != nil {
		return Segment{}, err
	}
	next := make([]string, max(1, q.cfg.Ahead))
	for i := range next {
		next[i] = q.path(FileName(start + int64(i+1)*q.cfg.FileSize))
	}
	f, err := q.cfg.Allocator.Get(q.path(FileName(start)), q.cfg.FileSize, next...)
	if err != nil {
		return Segment{}, err
	}
	return q.add(start, f), nil
}

// Flush makes [FlushedOffset, upTo) durable across segments and advances
// FlushedOffset; upTo is clamped to WriteOffset. On error FlushedOffset
// stays at the end of the last segment flushed completely.
func (q *Queue) Flush(upTo int64) error {
	q.flushMu.Lock()
	defer q.flushMu.Unlock()
	if q.closed.Load() {
		return fmt.Errorf("%w: queue %s", ErrClosed, q.cfg.Dir)
	}
	upTo = min(upTo, q.write.Load())
	from := q.flushed.Load()
	for _, s := range q.list() {
		lo, hi := max(from, s.Start), min(upTo, s.End())
		if lo >= hi {
			continue
		}
		if err := s.File.Flush(lo-s.Start, hi-s.Start); err != nil {
			return err
		}
		q.flushed.Store(hi)
	}
	if upTo > from {
		q.flushed.Store(upTo)
	}
	return nil
}

// TruncateDirty cuts everything at and after off: files that start after off
// are deleted, the bytes from off to the end of its file are zeroed (durably),
// and WriteOffset/FlushedOffset become min(them, off).
//
// Only bytes below the old WriteOffset are zeroed (bytes above it were never
// written). Files are deleted newest first, so a crash in the middle leaves
// no hole; running TruncateDirty again finishes the job.
func (q *Queue) TruncateDirty(off int64) error {
	q.flushMu.Lock()
	defer q.flushMu.Unlock()
	if q.closed.Load() {
		return fmt.Errorf("%w: queue %s", ErrClosed, q.cfg.Dir)
	}
	oldWrite := q.write.Load()
	q.write.Store(min(oldWrite, off))
	q.flushed.Store(min(q.flushed.Load(), off))
	segs := q.list()
	keep := len(segs)
	for keep > 0 && segs[keep-1].Start > off {
		keep--
	}
	if err := q.deleteNewest(segs, keep); err != nil {
		return err
	}
	if keep == 0 {
		return nil
	}
	last := segs[keep-1]
	if hi := min(oldWrite, last.End()); hi > off {
		return last.File.Zero(off-last.Start, hi-last.Start)
	}
	return nil
}

// deleteNewest deletes segs[keep:], newest first.
func (q *Queue) deleteNewest(segs []Segment, keep int) error {
	if keep == len(segs) {
		return nil
	}
	for i := len(segs) - 1; i >= keep; i-- {
		q.publish(segs[:i:i])
		if err := q.remove(segs[i]); err != nil {
			return err
		}
	}
	return q.syncDir()
}

func (q *Queue) remove(s Segment) error {
	name := s.File.Name()
	if err := s.File.Close(); err != nil {
		return err
	}
	if err := q.fs.Remove(name); err != nil {
		return fmt.Errorf("mmap: delete %s: %w", name, err)
	}
	q.log.Debug("segment deleted", "path", name)
	return nil
}

func (q *Queue) syncDir() error {
	if err := q.fs.SyncDir(q.cfg.Dir); err != nil {
		return fmt.Errorf("mmap: queue %s: %w", q.cfg.Dir, err)
	}
	return nil
}

// DeleteOldest deletes up to max files oldest first while keep(seg) is false,
// never the last file, stopping at the first file it must keep (so no holes).
// It returns how many files it deleted.
func (q *Queue) DeleteOldest(max int, keep func(Segment) bool) (int, error) {
	q.flushMu.Lock()
	defer q.flushMu.Unlock()
	if q.closed.Load() {
		return 0, fmt.Errorf("%w: queue %s", ErrClosed, q.cfg.Dir)
	}
	segs := q.list()
	n := 0
	for n < max && n < len(segs)-1 && !keep(segs[n]) {
		n++
	}
	if n == 0 {
		return 0, nil
	}
	q.publish(segs[n:])
	for i := 0; i < n; i++ {
		if err := q.remove(segs[i]); err != nil {
			return i, err
		}
	}
	return n, q.syncDir()
}

// Close closes every file.
func (q *Queue) Close() error {
	q.flushMu.Lock()
	defer q.flushMu.Unlock()
	if q.closed.Swap(true) {
		return fmt.Errorf("%w: queue %s", ErrClosed, q.cfg.Dir)
	}
	segs := q.list()
	q.publish(nil)
	return closeAll(segs)
}
