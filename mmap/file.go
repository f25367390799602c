package mmap

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"

	"github.com/raftmq/raftmq/vfs"
)

// openOrCreate opens name, checking its size, or creates it at full size.
// It reports whether the file was created.
func openOrCreate(fsys vfs.FS, name string, size int64) (vfs.File, bool, error) {
	f, err := fsys.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = createFile(fsys, name, size)
		return f, err == nil, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("mmap: open %s: %w", name, err)
	}
	got, err := f.Size()
	if err == nil && got != size {
		err = fmt.Errorf("%w: %s has %d bytes, want %d", ErrFileSize, name, got, size)
	}
	if err != nil {
		f.Close()
		return nil, false, err
	}
	return f, false, nil
}

// createFile creates name at full size through a temporary name, so the
// final name never refers to a short file (see tmpSuffix).
func createFile(fsys vfs.FS, name string, size int64) (vfs.File, error) {
	tmp := name + tmpSuffix
	if err := prepareTmp(fsys, tmp, size); err != nil {
		fsys.Remove(tmp)
		return nil, fmt.Errorf("mmap: create %s: %w", name, err)
	}
	if err := fsys.Rename(tmp, name); err != nil {
		fsys.Remove(tmp)
		return nil, fmt.Errorf("mmap: create %s: %w", name, err)
	}
	if err := fsys.SyncDir(filepath.Dir(name)); err != nil {
		return nil, fmt.Errorf("mmap: create %s: %w", name, err)
	}
	f, err := fsys.Open(name)
	if err != nil {
		return nil, fmt.Errorf("mmap: create %s: %w", name, err)
	}
	return f, nil
}

func prepareTmp(fsys vfs.FS, tmp string, size int64) error {
	f, err := fsys.Create(tmp)
	if err != nil {
		return err
	}
	err = f.Preallocate(0, size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// accountWrite tells a metered file (vfs.Metered) that n bytes of it were
// written through the mapping, which its WriteAt never sees.
func accountWrite(f vfs.File, n int64) {
	if a, ok := f.(vfs.WriteAccounter); ok && n > 0 {
		a.AccountWrite(n)
	}
}

// checkRange validates [from, to) against a file of the given size.
func checkRange(name string, from, to, size int64) error {
	if from < 0 || from > to || to > size {
		return fmt.Errorf("%w: %s: [%d, %d) of %d bytes", ErrOutOfRange, name, from, to, size)
	}
	return nil
}

// readFull reads the whole file into a new buffer.
func readFull(f vfs.File, size int64) ([]byte, error) {
	b := make([]byte, size)
	n, err := f.ReadAt(b, 0)
	if int64(n) == size && (err == nil || errors.Is(err, io.EOF)) {
		return b, nil
	}
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return nil, err
}
