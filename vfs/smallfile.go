package vfs

import (
	"errors"
	"fmt"
)

// ErrFileTooLarge is returned (wrapped) by ReadFile for a file above its
// limit; callers reading a file of theirs usually report it as corruption.
var ErrFileTooLarge = errors.New("vfs: file larger than its limit")

// ReadFile reads the whole of name, a file expected to hold at most limit
// bytes (metadata, checkpoints): a larger one is an error wrapping
// ErrFileTooLarge, and nothing is allocated for it.
func ReadFile(fsys FS, name string, limit int64) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	if size > limit {
		return nil, fmt.Errorf("%w: %s is %d bytes (limit %d)", ErrFileTooLarge, name, size, limit)
	}
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil && size > 0 {
		return nil, err
	}
	return b, nil
}

// WriteFile creates (or truncates) name, writes data and syncs the file
// before closing it. It does not sync the directory: a caller that needs
// the name durable syncs it (or renames the file into place and syncs).
func WriteFile(fsys FS, name string, data []byte) error {
	f, err := fsys.Create(name)
	if err != nil {
		return err
	}
	if len(data) > 0 {
		if _, err := f.WriteAt(data, 0); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
