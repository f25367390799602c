package vfs

import (
	"os"
	"path/filepath"
)

// Default is the host file system (the same value OS returns). Treat it as
// a constant.
var Default FS = osFS{}

// OS returns the host file system.
func OS() FS { return osFS{} }

type osFS struct{}

func (osFS) Create(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return &osFile{f: f}, nil
}

func (osFS) Open(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	return &osFile{f: f}, nil
}

func (osFS) Remove(name string) error              { return os.Remove(name) }
func (osFS) RemoveAll(name string) error           { return os.RemoveAll(name) }
func (osFS) Rename(oldname, newname string) error  { return os.Rename(oldname, newname) }
func (osFS) Link(oldname, newname string) error    { return os.Link(oldname, newname) }
func (osFS) Stat(name string) (os.FileInfo, error) { return os.Stat(name) }

func (osFS) List(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir) // sorted by name
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}

// MkdirAll creates dir and its missing parents and makes them durable: the
// parent of every directory it creates is fsynced after the mkdir, and so
// is dir's parent even when dir existed (an earlier run may have crashed
// between its mkdir and that fsync). Without this a power loss can take a
// new directory, and every fsynced file in it, away.
func (fs osFS) MkdirAll(dir string, perm os.FileMode) error {
	dir = filepath.Clean(dir)
	var created []string
	for p := dir; ; p = filepath.Dir(p) {
		if _, err := os.Stat(p); err == nil {
			break
		}
		created = append(created, p)
		if filepath.Dir(p) == p {
			break
		}
	}
	if err := os.MkdirAll(dir, perm); err != nil {
		return err
	}
	if len(created) == 0 {
		created = []string{dir}
	}
	for i := len(created) - 1; i >= 0; i-- { // top-down
		if err := fs.SyncDir(filepath.Dir(created[i])); err != nil {
			return err
		}
	}
	return nil
}

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(filepath.Clean(dir))
	if err != nil {
		return err
	}
	serr := d.Sync()
	cerr := d.Close()
	if serr != nil {
		return serr
	}
	return cerr
}

type osFile struct {
	f *os.File
}

func (o *osFile) ReadAt(p []byte, off int64) (int, error)  { return o.f.ReadAt(p, off) }
func (o *osFile) WriteAt(p []byte, off int64) (int, error) { return o.f.WriteAt(p, off) }
func (o *osFile) Close() error                             { return o.f.Close() }
func (o *osFile) Name() string                             { return o.f.Name() }
func (o *osFile) Truncate(size int64) error                { return o.f.Truncate(size) }
func (o *osFile) Fd() uintptr                              { return o.f.Fd() }
func (o *osFile) Sync() error                              { return datasync(o.f) }

func (o *osFile) Size() (int64, error) {
	fi, err := o.f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (o *osFile) Preallocate(offset, length int64) error {
	return preallocate(o, offset, length)
}

// extendTo grows the file to at least end bytes (the portable fallback of
// Preallocate).
func (o *osFile) extendTo(end int64) error {
	size, err := o.Size()
	if err != nil {
		return err
	}
	if size >= end {
		return nil
	}
	return o.f.Truncate(end)
}
