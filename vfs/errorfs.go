package vfs

import (
	"fmt"
	"math/rand"
	"os"
	"sync"
)

// OpKind names an FS or File operation for error injection.
type OpKind int

// The operations an Injector is asked about.
const (
	OpCreate OpKind = iota
	OpOpen
	OpRemove
	OpRemoveAll
	OpRename
	OpLink
	OpMkdirAll
	OpList
	OpStat
	OpSyncDir
	OpRead
	OpWrite
	OpSync
	OpTruncate
	OpSize
	OpPreallocate
	OpClose
	numOpKinds
)

var opKindNames = [numOpKinds]string{
	"create", "open", "remove", "removeall", "rename", "link", "mkdirall",
	"list", "stat", "syncdir", "read", "write", "sync", "truncate", "size",
	"preallocate", "close",
}

func (k OpKind) String() string {
	if k >= 0 && k < numOpKinds {
		return opKindNames[k]
	}
	return fmt.Sprintf("opkind(%d)", int(k))
}

// Op describes one operation: Path is the file or directory (the old name
// for Rename and Link); Offset and Length are set for reads, writes,
// truncations (Offset = new size) and preallocations.
type Op struct {
	Kind   OpKind
	Path   string
	Offset int64
	Length int
}

// Injector decides, before each operation runs, whether it fails. A
// non-nil error is returned instead of running the operation; the ready
// injectors return errors wrapping ErrInjected. Injectors must be safe for
// concurrent use.
type Injector interface {
	MaybeError(op Op) error
}

// InjectorFunc adapts a function to Injector.
type InjectorFunc func(op Op) error

// MaybeError implements Injector.
func (f InjectorFunc) MaybeError(op Op) error { return f(op) }

func injected(op Op, n int) error {
	return fmt.Errorf("%w: %s %s (op %d)", ErrInjected, op.Kind, op.Path, n)
}

// OnIndex fails operation number k (0-based, counting every operation the
// wrapped FS sees) once.
func OnIndex(k int) Injector {
	var mu sync.Mutex
	n := 0
	return InjectorFunc(func(op Op) error {
		mu.Lock()
		defer mu.Unlock()
		i := n
		n++
		if i == k {
			return injected(op, i)
		}
		return nil
	})
}

// OnKind fails the k-th (0-based) operation of the given kind once.
func OnKind(kind OpKind, k int) Injector {
	var mu sync.Mutex
	n := 0
	return InjectorFunc(func(op Op) error {
		if op.Kind != kind {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		i := n
		n++
		if i == k {
			return injected(op, i)
		}
		return nil
	})
}

// Randomly fails each operation of the given kinds (all kinds if none)
// with the given probability, drawing from r under a lock.
func Randomly(r *rand.Rand, probability float64, kinds ...OpKind) Injector {
	var mu sync.Mutex
	var want [numOpKinds]bool
	for _, k := range kinds {
		if k >= 0 && k < numOpKinds {
			want[k] = true
		}
	}
	n := 0
	return InjectorFunc(func(op Op) error {
		if len(kinds) > 0 && (op.Kind < 0 || op.Kind >= numOpKinds || !want[op.Kind]) {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		n++
		if r.Float64() < probability {
			return injected(op, n-1)
		}
		return nil
	})
}

// WithInjector wraps fs so that inj is consulted before every operation of
// the FS and of the files it opens (Name and Fd excepted).
func WithInjector(fs FS, inj Injector) FS {
	return &errorFS{fs: fs, inj: inj}
}

type errorFS struct {
	fs  FS
	inj Injector
}

func (e *errorFS) check(kind OpKind, path string) error {
	return e.inj.MaybeError(Op{Kind: kind, Path: path})
}

func (e *errorFS) Create(name string) (File, error) {
	if err := e.check(OpCreate, name); err != nil {
		return nil, err
	}
	f, err := e.fs.Create(name)
	if err != nil {
		return nil, err
	}
	return &errorFile{f: f, inj: e.inj}, nil
}

func (e *errorFS) Open(name string) (File, error) {
	if err := e.check(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := e.fs.Open(name)
	if err != nil {
		return nil, err
	}
	return &errorFile{f: f, inj: e.inj}, nil
}

func (e *errorFS) Remove(name string) error {
	if err := e.check(OpRemove, name); err != nil {
		return err
	}
	return e.fs.Remove(name)
}

func (e *errorFS) RemoveAll(name string) error {
	if err := e.check(OpRemoveAll, name); err != nil {
		return err
	}
	return e.fs.RemoveAll(name)
}

func (e *errorFS) Rename(oldname, newname string) error {
	if err := e.check(OpRename, oldname); err != nil {
		return err
	}
	return e.fs.Rename(oldname, newname)
}

func (e *errorFS) Link(oldname, newname string) error {
	if err := e.check(OpLink, oldname); err != nil {
		return err
	}
	return e.fs.Link(oldname, newname)
}

func (e *errorFS) MkdirAll(dir string, perm os.FileMode) error {
	if err := e.check(OpMkdirAll, dir); err != nil {
		return err
	}
	return e.fs.MkdirAll(dir, perm)
}

func (e *errorFS) List(dir string) ([]string, error) {
	if err := e.check(OpList, dir); err != nil {
		return nil, err
	}
	return e.fs.List(dir)
}

func (e *errorFS) Stat(name string) (os.FileInfo, error) {
	if err := e.check(OpStat, name); err != nil {
		return nil, err
	}
	return e.fs.Stat(name)
}

func (e *errorFS) SyncDir(dir string) error {
	if err := e.check(OpSyncDir, dir); err != nil {
		return err
	}
	return e.fs.SyncDir(dir)
}

// Space is the wrapped file system's; it injects nothing (a full disk is
// a capacity of the MemFS below, not an error of this call).
func (e *errorFS) Space(path string) (Space, error) { return e.fs.Space(path) }

type errorFile struct {
	f   File
	inj Injector
}

func (e *errorFile) check(kind OpKind, off int64, n int) error {
	return e.inj.MaybeError(Op{Kind: kind, Path: e.f.Name(), Offset: off, Length: n})
}

func (e *errorFile) Name() string { return e.f.Name() }
func (e *errorFile) Fd() uintptr  { return e.f.Fd() }

func (e *errorFile) ReadAt(p []byte, off int64) (int, error) {
	if err := e.check(OpRead, off, len(p)); err != nil {
		return 0, err
	}
	return e.f.ReadAt(p, off)
}

func (e *errorFile) WriteAt(p []byte, off int64) (int, error) {
	if err := e.check(OpWrite, off, len(p)); err != nil {
		return 0, err
	}
	return e.f.WriteAt(p, off)
}

func (e *errorFile) Close() error {
	if err := e.check(OpClose, 0, 0); err != nil {
		return err
	}
	return e.f.Close()
}

func (e *errorFile) Sync() error {
	if err := e.check(OpSync, 0, 0); err != nil {
		return err
	}
	return e.f.Sync()
}

func (e *errorFile) Truncate(size int64) error {
	if err := e.check(OpTruncate, size, 0); err != nil {
		return err
	}
	return e.f.Truncate(size)
}

func (e *errorFile) Size() (int64, error) {
	if err := e.check(OpSize, 0, 0); err != nil {
		return 0, err
	}
	return e.f.Size()
}

func (e *errorFile) Preallocate(offset, length int64) error {
	if err := e.check(OpPreallocate, offset, int(length)); err != nil {
		return err
	}
	return e.f.Preallocate(offset, length)
}
