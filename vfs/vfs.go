package vfs

import (
	"errors"
	"io"
	"os"
	"syscall"
)

// NoFd is returned by File.Fd when the file has no operating-system
// descriptor (the in-memory implementation). mmap uses it to choose between
// a real mapping and the heap-backed twin.
const NoFd = ^uintptr(0)

// ErrCrashed is returned by every operation of a file system that a test has
// "crashed" (see MemFS.CrashAt): nothing after the crash point reaches the
// clone that recovery will see.
var ErrCrashed = errors.New("vfs: file system crashed")

// ErrInjected is the error an Injector returns for an injected fault.
var ErrInjected = errors.New("vfs: injected error")

// ErrNoSpaceInfo is returned by FS.Space when the file system cannot tell
// its size (a MemFS without a capacity, a platform without statfs).
var ErrNoSpaceInfo = errors.New("vfs: file system size unknown")

// IsNoSpace reports whether err says the file system is full (ENOSPC, from
// a write, a fallocate or a file creation): unlike other I/O errors it
// clears once space is freed, so a writer may wait and retry.
func IsNoSpace(err error) bool { return errors.Is(err, syscall.ENOSPC) }

// IsSyncFailure reports whether err comes from a sync (fdatasync, fsync,
// msync, a directory's fsync): what the sync covered may be lost on disk
// while the page cache still shows it, so unlike a refused write it is
// never waited out and retried, whatever its errno.
func IsSyncFailure(err error) bool {
	var pe *os.PathError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Op {
	case "fdatasync", "fsync", "sync", "msync":
		return true
	}
	return false
}

// Space is the size of a file system, in bytes, as statfs(2) reports it.
// Free counts the blocks reserved for root too; Avail is what an
// unprivileged writer can still use.
type Space struct {
	Total, Free, Avail uint64
}

// File is an open file. All offsets are absolute; there is no file position.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	// Name is the path the file was opened with.
	Name() string
	// Sync makes every byte written so far durable (fdatasync).
	Sync() error
	// Truncate changes the size of the file.
	Truncate(size int64) error
	// Size is the current size of the file.
	Size() (int64, error)
	// Preallocate reserves [offset, offset+length) so later writes there do
	// not allocate (fallocate on Linux; a plain extension elsewhere).
	Preallocate(offset, length int64) error
	// Fd is the OS descriptor, or NoFd.
	Fd() uintptr
}

// FS is the file system seam: everything in the store opens files through it.
// Paths use the host separator (filepath.Join).
type FS interface {
	// Create creates name, truncating it if it exists, opened read-write.
	Create(name string) (File, error)
	// Open opens an existing file read-write.
	Open(name string) (File, error)
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// RemoveAll removes a path and everything below it.
	RemoveAll(name string) error
	// Rename atomically replaces newname with oldname.
	Rename(oldname, newname string) error
	// Link creates newname as a hard link to oldname.
	Link(oldname, newname string) error
	// MkdirAll creates a directory and its parents.
	MkdirAll(dir string, perm os.FileMode) error
	// List returns the names (not paths) in dir, sorted.
	List(dir string) ([]string, error)
	// Stat describes a path.
	Stat(name string) (os.FileInfo, error)
	// SyncDir makes the directory entries of dir durable.
	SyncDir(dir string) error
	// Space reports the size of the file system holding path, or
	// ErrNoSpaceInfo.
	Space(path string) (Space, error)
}
