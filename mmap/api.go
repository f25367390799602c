package mmap

// API CONTRACT (written first so commitlog, consumequeue and index can be
// built in parallel). Bodies are filled in by the mmap implementation; the
// exported names and signatures below are fixed — add, don't change.

import (
	"errors"

	"github.com/hashicorp/go-hclog"
	"github.com/raftmq/raftmq/vfs"
)

var (
	// ErrFileSize: an existing file does not have the size its queue expects.
	ErrFileSize = errors.New("mmap: file has the wrong size")
	// ErrFileName: a file in a queue directory is not a 20-digit offset.
	ErrFileName = errors.New("mmap: file name is not a 20-digit offset")
	// ErrClosed: the file, queue or allocator was closed.
	ErrClosed = errors.New("mmap: closed")
	// ErrOutOfRange: an offset or range outside the file or queue.
	ErrOutOfRange = errors.New("mmap: offset out of range")
)

// Options tune how a File is opened.
type Options struct {
	// PreTouch writes one byte per page after mapping so that first writes
	// do not page-fault (the allocator sets it for fresh segments).
	PreTouch bool
	// Heap forces the heap-backed twin even on an OS file system.
	Heap bool
}

// File is one mapped file of a fixed size. Writers copy straight into
// Bytes(); Flush makes a range durable. The real implementation is an mmap of
// an OS file (msync on Flush); the heap twin holds the bytes in memory and on
// Flush writes the range to its vfs.File and syncs it, so crash tests on
// vfs.MemFS see exactly what was flushed.
type File interface {
	Name() string
	Size() int64
	// Bytes is the whole mapping; len(Bytes()) == Size(). Valid until Close.
	Bytes() []byte
	// Flush makes [from, to) durable.
	Flush(from, to int64) error
	// Zero clears [from, to) and makes the zeros durable (punch hole or
	// memclr + flush).
	Zero(from, to int64) error
	// WillNeed / DontNeed are madvise hints; no-ops for the heap twin.
	WillNeed() error
	DontNeed() error
	// Close unmaps and closes; it does not delete.
	Close() error
}

// Open maps name with the given size, creating and preallocating it if it
// does not exist. An existing file of another size gives ErrFileSize (wrapped
// with the path). The real mmap is used when the vfs file has an OS descriptor
// and opts.Heap is false; otherwise the heap twin.
func Open(fs vfs.FS, name string, size int64, opts Options) (File, error) {
	panic("mmap.Open: not implemented yet")
}

// FileName returns the 20-digit, zero-padded name for a start offset.
func FileName(start int64) string { panic("not implemented yet") }

// ParseFileName is the inverse of FileName; it rejects anything else.
func ParseFileName(name string) (int64, error) { panic("not implemented yet") }

// Segment is one file of a Queue.
type Segment struct {
	Start int64 // absolute offset of Bytes()[0]
	File  File
}

// End is Start + Size.
func (s Segment) End() int64 { return s.Start + s.File.Size() }

// QueueConfig describes a directory of equal-size files named by start offset.
type QueueConfig struct {
	Dir      string
	FileSize int64
	// Allocator, if set, prepares the next and next-next file in the
	// background; Roll then takes a ready file instead of creating one.
	Allocator *Allocator
	// PreTouch applies to files the queue creates itself.
	PreTouch bool
	Logger   hclog.Logger
}

// Queue is an ordered list of equal-size mapped files. It is not safe for
// concurrent mutation; readers may call Find concurrently with one writer.
// The queue tracks two watermarks that its user sets: WriteOffset (end of
// written data) and FlushedOffset (end of durable data).
type Queue struct{}

// OpenQueue loads every file in cfg.Dir (creating the directory), checking
// names (ErrFileName) and sizes (ErrFileSize). A loaded queue has
// WriteOffset = FlushedOffset = end of the last file until the user
// (recovery) calls TruncateDirty or SetWriteOffset.
func OpenQueue(fs vfs.FS, cfg QueueConfig) (*Queue, error) { panic("not implemented yet") }

// FileSize is the configured size of every file.
func (q *Queue) FileSize() int64 { panic("not implemented yet") }

// Segments returns the files oldest first (a copy of the list).
func (q *Queue) Segments() []Segment { panic("not implemented yet") }

// Empty reports whether the queue has no files.
func (q *Queue) Empty() bool { panic("not implemented yet") }

// MinOffset is the start of the first file (0 when empty).
func (q *Queue) MinOffset() int64 { panic("not implemented yet") }

// WriteOffset is the end of written data.
func (q *Queue) WriteOffset() int64 { panic("not implemented yet") }

// SetWriteOffset moves the write watermark (the user wrote into Bytes()).
func (q *Queue) SetWriteOffset(off int64) { panic("not implemented yet") }

// FlushedOffset is the end of durable data.
func (q *Queue) FlushedOffset() int64 { panic("not implemented yet") }

// Find returns the segment holding off (Start <= off < End).
func (q *Queue) Find(off int64) (Segment, bool) { panic("not implemented yet") }

// Last returns the newest segment.
func (q *Queue) Last() (Segment, bool) { panic("not implemented yet") }

// Create adds a new segment starting at start, which must be the end of the
// last segment or, for an empty queue, any multiple of FileSize.
func (q *Queue) Create(start int64) (Segment, error) { panic("not implemented yet") }

// Roll adds the segment that follows the last one (at 0 for an empty queue
// whose WriteOffset is 0, else at WriteOffset rounded down to FileSize),
// taking it from the allocator when there is one.
func (q *Queue) Roll() (Segment, error) { panic("not implemented yet") }

// Flush makes [FlushedOffset, upTo) durable across segments and advances
// FlushedOffset; upTo is clamped to WriteOffset.
func (q *Queue) Flush(upTo int64) error { panic("not implemented yet") }

// TruncateDirty cuts everything at and after off: files that start after off
// are deleted, the bytes from off to the end of its file are zeroed (durably),
// and WriteOffset/FlushedOffset become min(them, off).
func (q *Queue) TruncateDirty(off int64) error { panic("not implemented yet") }

// DeleteOldest deletes up to max files oldest first while keep(seg) is false,
// never the last file, stopping at the first file it must keep (so no holes).
// It returns how many files it deleted.
func (q *Queue) DeleteOldest(max int, keep func(Segment) bool) (int, error) {
	panic("not implemented yet")
}

// Close closes every file.
func (q *Queue) Close() error { panic("not implemented yet") }

// Allocator prepares files ahead of need in one background goroutine.
type Allocator struct{}

// AllocatorOptions configure an Allocator.
type AllocatorOptions struct {
	PreTouch bool
	Logger   hclog.Logger
}

// NewAllocator starts the allocator goroutine; Close stops and waits for it.
func NewAllocator(fs vfs.FS, opts AllocatorOptions) *Allocator { panic("not implemented yet") }

// Get returns the file name of the given size, prepared in the background if
// it was requested before (waiting for it if still in progress), created
// synchronously otherwise; it then queues next (if not "") for preparation.
func (a *Allocator) Get(name string, size int64, next string) (File, error) {
	panic("not implemented yet")
}

// Close stops the goroutine, closes and deletes prepared files nobody took.
func (a *Allocator) Close() error { panic("not implemented yet") }
