package vfs

import (
	"bytes"
	"errors"
	"io/fs"
	"path/filepath"
	"testing"
)

// ReadFile returns the whole content (also of an empty file), refuses a file
// above the limit with ErrFileTooLarge and passes a missing file's
// fs.ErrNotExist through, on the real and the in-memory file system.
func TestReadFile(t *testing.T) {
	for name, fsys := range map[string]FS{"os": OS(), "mem": NewMem()} {
		dir := "/d"
		if name == "os" {
			dir = t.TempDir()
		}
		must(t, fsys.MkdirAll(dir, 0o755))
		write := func(file string, data []byte) string {
			p := filepath.Join(dir, file)
			f, err := fsys.Create(p)
			must(t, err)
			if len(data) > 0 {
				_, err = f.WriteAt(data, 0)
				must(t, err)
			}
			must(t, f.Close())
			return p
		}
		data := bytes.Repeat([]byte("0123456789"), 100)
		full, empty := write("full", data), write("empty", nil)
		if got, err := ReadFile(fsys, full, int64(len(data))); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: ReadFile at the limit = %d bytes, %v", name, len(got), err)
		}
		if got, err := ReadFile(fsys, empty, 0); err != nil || len(got) != 0 {
			t.Fatalf("%s: empty file = %q, %v", name, got, err)
		}
		if _, err := ReadFile(fsys, full, int64(len(data))-1); !errors.Is(err, ErrFileTooLarge) {
			t.Fatalf("%s: one byte above the limit: %v", name, err)
		}
		if _, err := ReadFile(fsys, filepath.Join(dir, "absent"), 10); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s: missing file: %v", name, err)
		}
	}
}

// WriteFile leaves exactly data in the file (also replacing a longer one,
// and for empty data), and it survives a crash that drops unsynced writes.
func TestWriteFileSynced(t *testing.T) {
	m := NewMem()
	must(t, m.MkdirAll("/d", 0o755))
	must(t, m.SyncDir("/"))
	must(t, WriteFile(m, "/d/f", bytes.Repeat([]byte("x"), 100)))
	must(t, WriteFile(m, "/d/f", []byte("short")))
	must(t, WriteFile(m, "/d/empty", nil))
	must(t, m.SyncDir("/d"))
	crashed := m.CrashClone(CrashOptions{})
	for _, fsys := range []*MemFS{m, crashed} {
		if got, err := ReadFile(fsys, "/d/f", 100); err != nil || string(got) != "short" {
			t.Fatalf("f = %q, %v", got, err)
		}
		if got, err := ReadFile(fsys, "/d/empty", 0); err != nil || len(got) != 0 {
			t.Fatalf("empty = %q, %v", got, err)
		}
	}
}
