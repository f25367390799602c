//go:build linux

package vfs

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

func datasync(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != unix.EINTR {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}

func preallocate(o *osFile, offset, length int64) error {
	if length <= 0 {
		return nil
	}
	err := unix.Fallocate(int(o.f.Fd()), 0, offset, length)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS):
		return o.extendTo(offset + length)
	default:
		return &os.PathError{Op: "fallocate", Path: o.f.Name(), Err: err}
	}
}
