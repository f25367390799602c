//go:build !linux

package vfs

import "os"

func datasync(f *os.File) error { return f.Sync() }

func preallocate(o *osFile, offset, length int64) error {
	if length <= 0 {
		return nil
	}
	return o.extendTo(offset + length)
}

func (osFS) Space(string) (Space, error) { return Space{}, ErrNoSpaceInfo }
