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

func (osFS) Space(path string) (Space, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return Space{}, &os.PathError{Op: "statfs", Path: path, Err: err}
	}
	if st.Blocks == 0 {
		return Space{}, ErrNoSpaceInfo
	}
	bs := uint64(st.Bsize)
	return Space{Total: st.Blocks * bs, Free: st.Bfree * bs, Avail: st.Bavail * bs}, nil
}
