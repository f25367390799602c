package verify

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/raftmq/raftmq/mmap"
	"github.com/raftmq/raftmq/vfs"
)

// copyTree copies the regular files directly in dir from src to dst (same
// paths) and returns the size of the first file.
func copyTree(src, dst vfs.FS, dir string) (int64, error) {
	names, err := src.List(dir)
	if err != nil {
		return 0, err
	}
	if err := dst.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	var first int64
	for _, n := range names {
		p := filepath.Join(dir, n)
		fi, err := src.Stat(p)
		if err != nil {
			return 0, err
		}
		if fi.IsDir() {
			continue
		}
		if err := copyFile(src, dst, p); err != nil {
			return 0, err
		}
		if _, err := mmap.ParseFileName(n); err == nil && first == 0 {
			first = fi.Size()
		}
	}
	return first, nil
}

func copyFile(src, dst vfs.FS, name string) error {
	in, err := src.Open(name)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := dst.Create(name)
	if err != nil {
		return err
	}
	defer out.Close()
	buf := make([]byte, 1<<20)
	for off := int64(0); ; {
		n, err := in.ReadAt(buf, off)
		if n > 0 {
			if _, werr := out.WriteAt(buf[:n], off); werr != nil {
				return werr
			}
			off += int64(n)
		}
		if errors.Is(err, io.EOF) || (err == nil && n == 0) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// readOnlyFS refuses every mutation. Existing directories satisfy MkdirAll;
// List hides leftovers of interrupted segment creates (which
// mmap.OpenQueue would delete). Files it opens refuse writes, so the heap
// twin cannot write back; a real mapping could (it writes through the
// mapping, not the file) but Stores never writes into one.
type readOnlyFS struct{ fs vfs.FS }

func (r readOnlyFS) Create(string) (vfs.File, error) { return nil, errReadOnly }
func (r readOnlyFS) Remove(string) error             { return errReadOnly }
func (r readOnlyFS) RemoveAll(string) error          { return errReadOnly }
func (r readOnlyFS) Rename(string, string) error     { return errReadOnly }
func (r readOnlyFS) Link(string, string) error       { return errReadOnly }
func (r readOnlyFS) SyncDir(string) error            { return nil }
func (r readOnlyFS) Stat(name string) (os.FileInfo, error) {
	return r.fs.Stat(name)
}

func (r readOnlyFS) Space(path string) (vfs.Space, error) { return r.fs.Space(path) }

func (r readOnlyFS) Open(name string) (vfs.File, error) {
	f, err := r.fs.Open(name)
	if err != nil {
		return nil, err
	}
	return readOnlyFile{f}, nil
}

func (r readOnlyFS) MkdirAll(dir string, _ os.FileMode) error {
	if fi, err := r.fs.Stat(dir); err == nil && fi.IsDir() {
		return nil
	}
	return fmt.Errorf("%w: mkdir %s", errReadOnly, dir)
}

func (r readOnlyFS) List(dir string) ([]string, error) {
	names, err := r.fs.List(dir)
	out := names[:0:0]
	for _, n := range names {
		if !isTmpSegment(n) {
			out = append(out, n)
		}
	}
	return out, err
}

// readOnlyFile refuses writes; Sync has nothing to do.
type readOnlyFile struct{ vfs.File }

func (f readOnlyFile) WriteAt([]byte, int64) (int, error) { return 0, errReadOnly }
func (f readOnlyFile) Truncate(int64) error               { return errReadOnly }
func (f readOnlyFile) Preallocate(int64, int64) error     { return errReadOnly }
func (f readOnlyFile) Sync() error                        { return nil }
