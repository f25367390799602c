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
