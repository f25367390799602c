package vfs

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
)

// A refused write or fallocate is waited out; a failed sync, of any kind
// and whatever its errno, is not.
func TestIsSyncFailure(t *testing.T) {
	for _, c := range []struct {
		err        error
		sync, full bool
	}{
		{&os.PathError{Op: "fallocate", Path: "f", Err: syscall.ENOSPC}, false, true},
		{&os.PathError{Op: "write", Path: "f", Err: syscall.ENOSPC}, false, true},
		{fmt.Errorf("flush: %w", &os.PathError{Op: "fdatasync", Path: "f", Err: syscall.ENOSPC}), true, true},
		{fmt.Errorf("mmap: %w", &os.PathError{Op: "msync", Path: "f", Err: syscall.EIO}), true, false},
		{&os.PathError{Op: "sync", Path: "d", Err: syscall.ENOSPC}, true, true},
		{errors.New("other"), false, false},
	} {
		if IsSyncFailure(c.err) != c.sync || IsNoSpace(c.err) != c.full {
			t.Errorf("%v: IsSyncFailure %v IsNoSpace %v, want %v %v", c.err, IsSyncFailure(c.err), IsNoSpace(c.err), c.sync, c.full)
		}
	}
}
