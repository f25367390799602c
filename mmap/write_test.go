package mmap

import (
	"errors"
	"path/filepath"
	"testing"
)

// WriteAt's bytes are what Bytes() shows at once, Flush makes them durable
// like bytes stored through Bytes(), and a range past the end is refused
// with nothing written, on every implementation.
func TestWriteAtConformance(t *testing.T) {
	for _, im := range impls {
		t.Run(im.name, func(t *testing.T) {
			fsys, dir := im.fs(t)
			name := filepath.Join(dir, FileName(0))
			f, err := Open(fsys, name, 3*4096, im.opts)
			must(t, err)
			const text = "written across a page boundary"
			must(t, WriteAt(f, []byte(text), 4090))
			if got := string(f.Bytes()[4090 : 4090+len(text)]); got != text {
				t.Fatalf("Bytes after WriteAt: %q", got)
			}
			copy(f.Bytes()[8000:], "stored")
			must(t, WriteAt(f, []byte("over"), 8002)) // over bytes stored through the mapping
			if got := string(f.Bytes()[8000:8006]); got != "stover" {
				t.Fatalf("mixed stores and WriteAt: %q", got)
			}
			if err := WriteAt(f, []byte("past the end"), 3*4096-4); !errors.Is(err, ErrOutOfRange) {
				t.Fatalf("WriteAt past the end: %v", err)
			}
			if err := WriteAt(f, []byte("x"), -1); !errors.Is(err, ErrOutOfRange) {
				t.Fatalf("WriteAt before the start: %v", err)
			}
			if f.Bytes()[3*4096-4] != 0 {
				t.Fatal("a refused WriteAt wrote")
			}
			must(t, f.Flush(4090, 8006))
			must(t, f.Close())
			g, err := Open(fsys, name, 3*4096, im.opts)
			must(t, err)
			defer g.Close()
			if got := string(g.Bytes()[4090 : 4090+len(text)]); got != text {
				t.Fatalf("reopened: %q", got)
			}
			if got := string(g.Bytes()[8000:8006]); got != "stover" {
				t.Fatalf("reopened: %q", got)
			}
		})
	}
}
