package node

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft-wal/types"
)

// walDeleteChunk and walDeletePause pace the removal of a segment: its
// blocks are freed a chunk at a time, each in a small journal transaction
// of its own, instead of all at once in one that every append's fdatasync
// then waits behind.
const (
	walDeleteChunk = 4 << 20
	walDeletePause = 10 * time.Millisecond
)

// lazyDeleteVFS is raft-wal's file system with segment deletion moved off
// the caller's goroutine: Delete queues the file and returns, and a
// goroutine of its own shrinks each queued file step by step, then
// deletes it through the wrapped file system.
//
// raft-wal deletes the segments a compaction (Raft's DeleteRange after a
// snapshot) dropped while it holds its write lock, each with a directory
// fsync: under load on a shared disk that took about 100 ms per 64 MiB
// segment, so every append of the node, on all three at once (they compact
// at the same index), waited about half a second once per snapshot. A file
// queued here is no longer in raft-wal's metadata (committed before it
// deletes anything), so a crash before its removal leaves an orphan that
// the next wal.Open lists and deletes; segment ids are never reused, so no
// new segment can take a queued file's name.
type lazyDeleteVFS struct {
	types.VFS
	logger hclog.Logger

	mu      sync.Mutex
	queued  []string // paths to remove
	running bool     // a removal goroutine owns queued
	closed  bool     // Close was called: Delete removes at once
	wg      sync.WaitGroup
}

// Delete queues dir/name for removal and returns at once (after Close it
// removes the file itself).
func (d *lazyDeleteVFS) Delete(dir, name string) error {
	path := filepath.Join(dir, name)
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return d.VFS.Delete(dir, name)
	}
	d.queued = append(d.queued, path)
	if !d.running {
		d.running = true
		d.wg.Add(1)
		go d.removeQueued()
	}
	d.mu.Unlock()
	return nil
}

// removeQueued removes queued files until none is left.
func (d *lazyDeleteVFS) removeQueued() {
	defer d.wg.Done()
	for {
		d.mu.Lock()
		paths := d.queued
		d.queued = nil
		if len(paths) == 0 {
			d.running = false
			d.mu.Unlock()
			return
		}
		d.mu.Unlock()
		d.remove(paths)
	}
}

// remove shrinks each of paths, then deletes it through the wrapped file
// system (which syncs the directory). A failure is logged: the file stays
// an orphan until the next open.
func (d *lazyDeleteVFS) remove(paths []string) {
	for _, p := range paths {
		d.shrink(p)
		err := d.VFS.Delete(filepath.Dir(p), filepath.Base(p))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			d.logger.Error("removing a compacted raft-wal segment failed; it is removed on the next start", "path", p, "error", err)
		}
	}
}

// shrink truncates the file at path to nothing in steps of
// walDeleteChunk, walDeletePause apart, unless Close is waiting.
func (d *lazyDeleteVFS) shrink(path string) {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return // Remove reports it
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return
	}
	for size := fi.Size(); size > 0; {
		size = max(0, size-walDeleteChunk)
		if err := f.Truncate(size); err != nil {
			return
		}
		d.mu.Lock()
		closed := d.closed
		d.mu.Unlock()
		if !closed && size > 0 {
			time.Sleep(walDeletePause)
		}
	}
}

// Close waits until every queued file is removed; later Deletes remove at
// once.
func (d *lazyDeleteVFS) Close() {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	d.wg.Wait()
}
