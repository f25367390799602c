package vfs

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"testing"
)

// TestConformance runs the same FS contract against the OS and MemFS.
func TestConformance(t *testing.T) {
	impls := map[string]func(t *testing.T) (FS, string){
		"os":  func(t *testing.T) (FS, string) { return OS(), t.TempDir() },
		"mem": func(t *testing.T) (FS, string) { return NewMem(), "/data" },
	}
	for name, mk := range impls {
		t.Run(name, func(t *testing.T) {
			for _, c := range conformanceCases {
				t.Run(c.name, func(t *testing.T) {
					fsys, root := mk(t)
					must(t, fsys.MkdirAll(root, 0o755))
					c.fn(t, fsys, root)
				})
			}
		})
	}
}

var conformanceCases = []struct {
	name string
	fn   func(t *testing.T, fsys FS, dir string)
}{
	{"ReadWrite", testReadWrite},
	{"TruncatePreallocate", testTruncatePreallocate},
	{"ListStat", testListStat},
	{"RenameLinkRemove", testRenameLinkRemove},
	{"Errors", testErrors},
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func testReadWrite(t *testing.T, fsys FS, dir string) {
	name := filepath.Join(dir, "a")
	f, err := fsys.Create(name)
	must(t, err)
	if f.Name() != name {
		t.Fatalf("Name = %q, want %q", f.Name(), name)
	}
	_, err = f.WriteAt([]byte("hello"), 3)
	must(t, err)
	must(t, f.Sync())
	buf := make([]byte, 10)
	n, err := f.ReadAt(buf, 0)
	if n != 8 || !errors.Is(err, io.EOF) {
		t.Fatalf("ReadAt = %d, %v; want 8, EOF", n, err)
	}
	if want := []byte("\x00\x00\x00hello"); !bytes.Equal(buf[:n], want) {
		t.Fatalf("content %q, want %q", buf[:n], want)
	}
	must(t, f.Close())
	g, err := fsys.Open(name)
	must(t, err)
	defer g.Close()
	n, err = g.ReadAt(buf[:5], 3)
	if n != 5 || err != nil || string(buf[:5]) != "hello" {
		t.Fatalf("reopen ReadAt = %d %v %q", n, err, buf[:5])
	}
	// Create truncates an existing file.
	h, err := fsys.Create(name)
	must(t, err)
	defer h.Close()
	if sz, _ := h.Size(); sz != 0 {
		t.Fatalf("size after re-Create = %d", sz)
	}
}

func testTruncatePreallocate(t *testing.T, fsys FS, dir string) {
	f, err := fsys.Create(filepath.Join(dir, "b"))
	must(t, err)
	defer f.Close()
	must(t, f.Preallocate(0, 8192))
	if sz, err := f.Size(); err != nil || sz != 8192 {
		t.Fatalf("Size after Preallocate = %d, %v", sz, err)
	}
	_, err = f.WriteAt([]byte{1, 2, 3}, 100)
	must(t, err)
	must(t, f.Truncate(101))
	must(t, f.Truncate(200))
	buf := make([]byte, 2)
	_, err = f.ReadAt(buf, 100)
	must(t, err)
	if buf[0] != 1 || buf[1] != 0 {
		t.Fatalf("after shrink+grow got %v, want [1 0]", buf)
	}
	// Preallocating inside the file does not shrink it.
	must(t, f.Preallocate(0, 10))
	if sz, _ := f.Size(); sz != 200 {
		t.Fatalf("Size = %d, want 200", sz)
	}
}

func testListStat(t *testing.T, fsys FS, dir string) {
	for _, n := range []string{"c", "a", "b"} {
		f, err := fsys.Create(filepath.Join(dir, n))
		must(t, err)
		must(t, f.Close())
	}
	must(t, fsys.MkdirAll(filepath.Join(dir, "sub", "deep"), 0o755))
	names, err := fsys.List(dir)
	must(t, err)
	if want := []string{"a", "b", "c", "sub"}; !slices.Equal(names, want) {
		t.Fatalf("List = %v, want %v", names, want)
	}
	fi, err := fsys.Stat(filepath.Join(dir, "sub"))
	must(t, err)
	if !fi.IsDir() || fi.Name() != "sub" {
		t.Fatalf("Stat(sub) = %v dir=%v", fi.Name(), fi.IsDir())
	}
	fi, err = fsys.Stat(filepath.Join(dir, "a"))
	must(t, err)
	if fi.IsDir() || fi.Size() != 0 {
		t.Fatalf("Stat(a) dir=%v size=%d", fi.IsDir(), fi.Size())
	}
	must(t, fsys.SyncDir(dir))
}

func writeFile(t *testing.T, fsys FS, name, content string) {
	t.Helper()
	f, err := fsys.Create(name)
	must(t, err)
	_, err = f.WriteAt([]byte(content), 0)
	must(t, err)
	must(t, f.Sync())
	must(t, f.Close())
}

func readAll(t *testing.T, fsys FS, name string) string {
	t.Helper()
	f, err := fsys.Open(name)
	must(t, err)
	defer f.Close()
	sz, err := f.Size()
	must(t, err)
	buf := make([]byte, sz)
	if _, err := f.ReadAt(buf, 0); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return string(buf)
}

func testRenameLinkRemove(t *testing.T, fsys FS, dir string) {
	a, b, c := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")
	writeFile(t, fsys, a, "AAA")
	writeFile(t, fsys, b, "B")
	must(t, fsys.Rename(a, b))
	if got := readAll(t, fsys, b); got != "AAA" {
		t.Fatalf("after rename b = %q", got)
	}
	if _, err := fsys.Stat(a); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Stat(a) after rename: %v", err)
	}
	must(t, fsys.Link(b, c))
	f, err := fsys.Open(c)
	must(t, err)
	_, err = f.WriteAt([]byte("Z"), 0)
	must(t, err)
	must(t, f.Close())
	if got := readAll(t, fsys, b); got != "ZAA" {
		t.Fatalf("write through link not visible: %q", got)
	}
	must(t, fsys.Remove(b))
	if got := readAll(t, fsys, c); got != "ZAA" {
		t.Fatalf("link lost content: %q", got)
	}
	sub := filepath.Join(dir, "sub")
	must(t, fsys.MkdirAll(filepath.Join(sub, "x"), 0o755))
	writeFile(t, fsys, filepath.Join(sub, "x", "f"), "f")
	if err := fsys.Remove(sub); err == nil {
		t.Fatal("Remove of a non-empty directory succeeded")
	}
	moved := filepath.Join(dir, "moved")
	must(t, fsys.Rename(sub, moved))
	if got := readAll(t, fsys, filepath.Join(moved, "x", "f")); got != "f" {
		t.Fatalf("renamed dir content %q", got)
	}
	must(t, fsys.RemoveAll(moved))
	names, err := fsys.List(dir)
	must(t, err)
	if !slices.Equal(names, []string{"c"}) {
		t.Fatalf("List after RemoveAll = %v", names)
	}
}

func testErrors(t *testing.T, fsys FS, dir string) {
	missing := filepath.Join(dir, "missing")
	if _, err := fsys.Open(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open missing: %v", err)
	}
	if _, err := fsys.Create(filepath.Join(missing, "x")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Create in missing dir: %v", err)
	}
	if err := fsys.Remove(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Remove missing: %v", err)
	}
	if _, err := fsys.List(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("List missing: %v", err)
	}
	writeFile(t, fsys, filepath.Join(dir, "x"), "x")
	if err := fsys.Link(filepath.Join(dir, "x"), filepath.Join(dir, "x")); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("Link onto existing: %v", err)
	}
	must(t, fsys.RemoveAll(missing))
}
