package recovery

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strconv"

	"github.com/raftmq/raftmq/vfs"
)

// AbortName is the file that exists while a store is open for writing. Its
// presence at open means the last run did not shut down cleanly. It holds the
// PID of the process that created it, as text.
const AbortName = "abort"

// AbortExists reports whether dir/abort exists.
func AbortExists(fsys vfs.FS, dir string) (bool, error) {
	_, err := fsys.Stat(filepath.Join(dir, AbortName))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// CreateAbort creates dir/abort with pid and makes it durable.
func CreateAbort(fsys vfs.FS, dir string, pid int) error {
	return writeFileAtomic(fsys, dir, AbortName, []byte(strconv.Itoa(pid)+"\n"))
}

// RemoveAbort removes dir/abort durably. Call it only after a clean shutdown
// that flushed and dispatched everything and wrote the final checkpoint.
func RemoveAbort(fsys vfs.FS, dir string) error {
	if err := fsys.Remove(filepath.Join(dir, AbortName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return fsys.SyncDir(dir)
}
