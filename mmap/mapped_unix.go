//go:build linux

package mmap

import (
	"errors"
	"fmt"
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
	if opts.PreTouch {
		// Each touched page is dirty now and will be written back: the disk
		// meter counts it (see vfs.Meter).
		accountWrite(f, preTouch(data, opts.Abort))
	}
	return &mappedFile{name: name, f: f, data: data, size: size}, nil
}

// touchChunk is how many bytes preTouch faults in between looks at abort.
const touchChunk = 4 << 20

// preTouch writes a zero into every page so it is faulted in now. Only for
// fresh (all-zero) files. It stops early once abort is closed. It returns
// the bytes of the pages it touched.
func preTouch(data []byte, abort <-chan struct{}) int64 {
	for chunk := 0; chunk < len(data); chunk += touchChunk {
		select {
		case <-abort:
			return int64(chunk)
		default:
		}
		end := min(chunk+touchChunk, len(data))
		for i := chunk; i < end; i += TouchPage {
			data[i] = 0
		}
	}
	return int64(len(data))
}

// Fd is the descriptor of the mapped file (recovery asks the file system
// where its data lies, SEEK_DATA, to skip holes when checking for zeros).
func (m *mappedFile) Fd() uintptr { return m.f.Fd() }

func (m *mappedFile) Name() string  { return m.name }
func (m *mappedFile) Size() int64   { return m.size }
func (m *mappedFile) Bytes() []byte { return m.data }

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
	if err := unix.Msync(m.data[start:to], unix.MS_SYNC); err != nil {
		return fmt.Errorf("mmap: msync %s: %w", m.name, err)
	}
	// msync writes back whole pages: the disk meter counts the page cover.
	accountWrite(m.f, min((to+page-1)&^(page-1), m.size)-start)
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
