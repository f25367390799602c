package mmap

// API CONTRACT (written first so commitlog, consumequeue and index can be
// built in parallel). Bodies are filled in by the mmap implementation; the
// exported names and signatures below are fixed — add, don't change.

import (
	"errors"
	"fmt"
	"io"

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
	// ErrNotContiguous: the files of a queue directory leave a gap or are
	// not aligned to the file size.
	ErrNotContiguous = errors.New("mmap: queue files are not contiguous")
)

// Options tune how a File is opened.
type Options struct {
	// PreTouch reads one byte per page after mapping so that first writes
	// take only a write-protect fault, not a page allocation (the allocator sets it for fresh segments).
	PreTouch bool
	// Abort, when closed, stops a pre-touch early: the file is still whole
	// and valid, only colder (the allocator closes it on shutdown so that
	// Close never waits for a 1 GiB segment to be faulted in).
	Abort <-chan struct{}
	// Random advises the kernel that access is random (MADV_RANDOM): no
	// readahead, so faulting one page of a fresh, mostly unwritten file does
	// not zero-fill megabytes around it (index slots, consume-queue units).
	Random bool
	// Heap forces the heap-backed twin even on an OS file system.
	Heap bool
}

// File is one mapped file of a fixed size. Writers copy straight into
// Bytes() or write through WriteAt; Flush makes a range durable. The real implementation is an mmap of
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
	// FlushReadsBytes reports whether Flush reads the bytes of Bytes(): the
	// heap twin copies the range to its file, msync does not read them. A
	// caller whose writers go on during a Flush must exclude them from it
	// when this is true (the data race is harmless with msync, where the
	// kernel writes back whatever the page holds, but not with a copy).
	FlushReadsBytes() bool
	// Zero clears [from, to) and makes the zeros durable (punch hole or
	// memclr + flush).
	Zero(from, to int64) error
	// WillNeed / DontNeed are madvise hints; no-ops for the heap twin.
	WillNeed() error
	DontNeed() error
	// Close unmaps and closes; it does not delete.
	Close() error
}

// ReaderAt returns f's pread path where it has one (the real mapping reads
// its file through the descriptor: the same page cache). Reading a large
// range of a file just mapped is several times faster that way than
// through the mapping, which takes a page fault per 4 KiB. The heap twin
// has none: its bytes are already in memory.
func ReaderAt(f File) (io.ReaderAt, bool) {
	r, ok := f.(io.ReaderAt)
	return r, ok
}

// Open maps name with the given size, creating and preallocating it if it
// does not exist. An existing file of another size gives ErrFileSize (wrapped
// with the path). The real mmap is used when the vfs file has an OS descriptor
// and opts.Heap is false; otherwise the heap twin.
func Open(fs vfs.FS, name string, size int64, opts Options) (File, error) {
	if size <= 0 || size > maxFileSize {
		return nil, fmt.Errorf("%w: %s: size %d", ErrOutOfRange, name, size)
	}
	f, created, err := openOrCreate(fs, name, size)
	if err != nil {
		return nil, err
	}
	if f.Fd() != vfs.NoFd && !opts.Heap && mmapSupported {
		opts.PreTouch = opts.PreTouch && created
		return openMapped(f, name, size, opts)
	}
	return openHeap(f, name, size)
}

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
	// Allocator, if set, prepares the files after the one Roll takes in
	// the background (Ahead of them); Roll then takes a ready file instead
	// of creating one.
	Allocator *Allocator
	// Ahead is how many files the Allocator prepares ahead of the one in
	// use (RocketMQ prepares one: the "next-next" file); 0 means 1.
	Ahead int
	// PreTouch applies to files the queue creates itself.
	PreTouch bool
	// Random is Options.Random for every file of the queue.
	Random bool
	Logger hclog.Logger
}

// AllocatorOptions configure an Allocator.
type AllocatorOptions struct {
	PreTouch bool
	Logger   hclog.Logger
}
