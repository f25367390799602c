//go:build linux

package mmap

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/raftmq/raftmq/vfs"
	"golang.org/x/sys/unix"
)

// mmapSupported: this platform maps files for real.
const mmapSupported = true

// mappedFile is a MAP_SHARED read-write mapping of a preallocated file.
type mappedFile struct {
	name string
	f    vfs.File
	data []byte
	size int64

	mu     sync.Mutex // serialises Zero and Close against Flush
	closed bool

	touchSum uint64 // what preTouch read (zeros); keeps its reads
}

func openMapped(f vfs.File, name string, size int64, opts Options) (File, error) {
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("mmap: map %s: %w", name, err)
	}
	if opts.Random {
		if err := unix.Madvise(data, unix.MADV_RANDOM); err != nil {
			_ = unix.Munmap(data)
			f.Close()
			return nil, fmt.Errorf("mmap: madvise %s: %w", name, err)
		}
	}
	m := &mappedFile{name: name, f: f, data: data, size: size}
	if opts.PreTouch {
		_, m.touchSum = preTouch(data, opts.Abort)
	}
	return m, nil
}

// touchChunk is how many bytes preTouch faults in between looks at abort,
// and the most one madvise populates at a time (it holds the mapping's
// lock for reading meanwhile).
const touchChunk = 4 << 20

// preTouch faults every page of data in now (faultIn): the page cache
// holds it (zeros, read from nothing: the file is fallocated) and the
// mapping points at it, so the writer's first store into it costs only a
// write-protect fault. Reading, not writing, keeps the pages clean: a
// written zero made every page of a fresh 1 GiB segment dirty long before
// the data came, and the kernel wrote those zeros back to disk (after 30 s)
// before writing the data over them — up to twice the commitlog's bytes.
// It stops early once abort is closed and returns the bytes it touched and
// the sum of the bytes read, if any (kept by the caller, so the reads stay).
func preTouch(data []byte, abort <-chan struct{}) (int64, uint64) {
	var sum uint64
	for chunk := 0; chunk < len(data); chunk += touchChunk {
		select {
		case <-abort:
			return int64(chunk), sum
		default:
		}
		sum += faultIn(data[chunk:min(chunk+touchChunk, len(data))])
	}
	return int64(len(data)), sum
}

func (m *mappedFile) touch(from, to int64) uint64 {
	from, to = max(from, 0), min(to, int64(len(m.data)))
	from &^= int64(unix.Getpagesize() - 1) // madvise takes a page-aligned start
	if from >= to {
		return 0
	}
	_, sum := preTouch(m.data[from:to], nil) // nil: never aborted
	return sum
}

// faultIn makes the pages of data (page-aligned start) resident and mapped
// without dirtying them: one madvise(MADV_POPULATE_READ) (Linux 5.14 and
// later), else a read of one byte per page, whose sum it returns.
//
// The madvise does in the kernel what the reads do by faulting once per
// page. On the virtual machines measured a page fault is dear: reading one
// byte per page of a fresh fallocated file ran at 1.7-2.5 GB/s, the madvise
// at 9.6-10.8 GB/s (BenchmarkFaultIn), and the reads had been the largest
// single user of CPU on nodes at half their maximum load.
func faultIn(data []byte) uint64 {
	if len(data) == 0 || populateRead(data) == nil {
		return 0
	}
	return touchPages(data)
}

// populateRead is madvise(MADV_POPULATE_READ) on data.
func populateRead(data []byte) error { return unix.Madvise(data, unix.MADV_POPULATE_READ) }

// pwrite writes p at off through the descriptor, all of it or an error.
func (m *mappedFile) pwrite(p []byte, off int64) error {
	for len(p) > 0 {
		n, err := unix.Pwrite(int(m.f.Fd()), p, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("mmap: %w", &os.PathError{Op: "pwrite", Path: m.name, Err: err})
		}
		if n == 0 {
			return fmt.Errorf("mmap: %w", &os.PathError{Op: "pwrite", Path: m.name, Err: io.ErrShortWrite})
		}
		p, off = p[n:], off+int64(n)
	}
	return nil
}

// Fd is the descriptor of the mapped file (recovery asks the file system
// where its data lies, SEEK_DATA, to skip holes when checking for zeros).
func (m *mappedFile) Fd() uintptr { return m.f.Fd() }

// ReadAt reads the file through its descriptor (pread): the same page cache
// as the mapping, without a page fault per 4 KiB of a fresh mapping (the
// commitlog's verifying scan reads whole segments this way).
func (m *mappedFile) ReadAt(p []byte, off int64) (int, error) { return m.f.ReadAt(p, off) }

func (m *mappedFile) Name() string  { return m.name }
func (m *mappedFile) Size() int64   { return m.size }
func (m *mappedFile) Bytes() []byte { return m.data }

func (m *mappedFile) FlushReadsBytes() bool { return false }

func (m *mappedFile) Flush(from, to int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.flushLocked(from, to)
}

// flushLocked msyncs the page-aligned cover of [from, to).
func (m *mappedFile) flushLocked(from, to int64) error {
	if m.closed {
		return fmt.Errorf("%w: %s", ErrClosed, m.name)
	}
	if err := checkRange(m.name, from, to, m.Size()); err != nil || from == to {
		return err
	}
	page := int64(unix.Getpagesize())
	start := from &^ (page - 1)
	if err := m.writeInChunks(start, to); err != nil {
		return err
	}
	if err := unix.Msync(m.data[start:to], unix.MS_SYNC); err != nil {
		return fmt.Errorf("mmap: %w", &os.PathError{Op: "msync", Path: m.name, Err: err})
	}
	// msync writes back whole pages: the disk meter counts the page cover.
	accountWrite(m.f, min((to+page-1)&^(page-1), m.size)-start)
	return nil
}

// flushChunk is the most one Flush has the kernel write at once.
const flushChunk = 256 << 10

// writeInChunks writes the dirty pages of [from, to) flushChunk at a time,
// waiting for each (sync_file_range), before the msync that makes the
// range durable finds them clean. One msync of a large range queues all of
// it at once, and every other sync on the disk (Raft's log fsyncs; the
// other nodes of a cluster on one machine) waits behind all of it: a
// commitlog flush of several MiB, and the index's flush of its slot table,
// up to 20 MB every IndexFlushInterval on every node at once. In chunks, a
// sync waits behind at most one. The range is written once either way,
// and where the file system lacks sync_file_range the msync writes it all.
func (m *mappedFile) writeInChunks(from, to int64) error {
	if to-from <= flushChunk {
		return nil
	}
	const wait = unix.SYNC_FILE_RANGE_WAIT_BEFORE | unix.SYNC_FILE_RANGE_WRITE | unix.SYNC_FILE_RANGE_WAIT_AFTER
	for off := from; off < to; off += flushChunk {
		n := min(flushChunk, to-off)
		err := unix.SyncFileRange(int(m.f.Fd()), off, n, wait)
		if unsupported(err) {
			return nil // the msync writes it all
		}
		if err != nil {
			return fmt.Errorf("mmap: %w", &os.PathError{Op: "sync_file_range", Path: m.name, Err: err})
		}
	}
	return nil
}

// Zero clears [from, to) durably: fallocate ZERO_RANGE (keeps the blocks
// allocated), else PUNCH_HOLE, then fdatasync; where neither is supported,
// memclr and msync.
func (m *mappedFile) Zero(from, to int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("%w: %s", ErrClosed, m.name)
	}
	if err := checkRange(m.name, from, to, m.Size()); err != nil || from == to {
		return err
	}
	fd := int(m.f.Fd())
	err := unix.Fallocate(fd, unix.FALLOC_FL_ZERO_RANGE|unix.FALLOC_FL_KEEP_SIZE, from, to-from)
	if unsupported(err) {
		err = unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, from, to-from)
	}
	switch {
	case err == nil:
		if err := m.f.Sync(); err != nil {
			return fmt.Errorf("mmap: zero %s: %w", m.name, err)
		}
		return nil
	case unsupported(err):
		clear(m.data[from:to])
		return m.flushLocked(from, to)
	default:
		return fmt.Errorf("mmap: zero %s: %w", m.name, err)
	}
}

func unsupported(err error) bool {
	return errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS)
}

func (m *mappedFile) WillNeed() error { return m.madvise(unix.MADV_WILLNEED) }
func (m *mappedFile) DontNeed() error { return m.madvise(unix.MADV_DONTNEED) }

func (m *mappedFile) madvise(advice int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("%w: %s", ErrClosed, m.name)
	}
	if err := unix.Madvise(m.data, advice); err != nil {
		return fmt.Errorf("mmap: madvise %s: %w", m.name, err)
	}
	return nil
}

// Close unmaps and closes; Bytes must not be used afterwards.
func (m *mappedFile) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("%w: %s", ErrClosed, m.name)
	}
	m.closed = true
	uerr := unix.Munmap(m.data)
	m.data = nil
	cerr := m.f.Close()
	if uerr != nil {
		return fmt.Errorf("mmap: munmap %s: %w", m.name, uerr)
	}
	if cerr != nil {
		return fmt.Errorf("mmap: close %s: %w", m.name, cerr)
	}
	return nil
}
