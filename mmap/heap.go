package mmap

import (
	"fmt"
	"sync"

	"github.com/raftmq/raftmq/vfs"
)

// heapFile is the heap-backed twin of a mapped file: the bytes live in a
// Go slice read from the file at open, and Flush writes a range back with
// WriteAt and syncs, so a vfs.MemFS crash clone holds what was flushed.
// On a file system that takes mapping views (vfs.MemFS's AttachMapping)
// the slice is attached as one, so a crash can also model the kernel
// writing its dirty pages back before any Flush.
type heapFile struct {
	name   string
	f      vfs.File
	data   []byte
	detach func() // nil unless attached

	mu     sync.Mutex // serialises Flush, Zero and Close
	closed bool
}

// mappingViews is implemented by files of a file system that models the
// write-back of shared mappings (vfs.MemFS).
type mappingViews interface {
	AttachMapping(view func() []byte) (detach func())
}

func openHeap(f vfs.File, name string, size int64) (File, error) {
	data, err := readFull(f, size)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("mmap: read %s: %w", name, err)
	}
	h := &heapFile{name: name, f: f, data: data}
	if mv, ok := f.(mappingViews); ok {
		h.detach = mv.AttachMapping(func() []byte { return h.data })
	}
	return h, nil
}

func (h *heapFile) Name() string    { return h.name }
func (h *heapFile) Size() int64     { return int64(len(h.data)) }
func (h *heapFile) Bytes() []byte   { return h.data }
func (h *heapFile) WillNeed() error { return nil }
func (h *heapFile) DontNeed() error { return nil }

func (h *heapFile) FlushReadsBytes() bool { return true }

func (h *heapFile) Flush(from, to int64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.flushLocked(from, to)
}

func (h *heapFile) flushLocked(from, to int64) error {
	if h.closed {
		return fmt.Errorf("%w: %s", ErrClosed, h.name)
	}
	if err := checkRange(h.name, from, to, h.Size()); err != nil || from == to {
		return err
	}
	if _, err := h.f.WriteAt(h.data[from:to], from); err != nil {
		return fmt.Errorf("mmap: flush %s: %w", h.name, err)
	}
	if err := h.f.Sync(); err != nil {
		return fmt.Errorf("mmap: flush %s: %w", h.name, err)
	}
	return nil
}

func (h *heapFile) Zero(from, to int64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return fmt.Errorf("%w: %s", ErrClosed, h.name)
	}
	if err := checkRange(h.name, from, to, h.Size()); err != nil {
		return err
	}
	clear(h.data[from:to])
	return h.flushLocked(from, to)
}

func (h *heapFile) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return fmt.Errorf("%w: %s", ErrClosed, h.name)
	}
	h.closed = true
	if h.detach != nil {
		h.detach()
	}
	if err := h.f.Close(); err != nil {
		return fmt.Errorf("mmap: close %s: %w", h.name, err)
	}
	return nil
}
