package vfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMeteredCountsWritesByClass(t *testing.T) {
	classify := func(name string) string {
		if strings.Contains(name, "/log/") {
			return "log"
		}
		return "nonsense" // not a class: counted under the last one
	}
	for _, c := range []struct {
		name string
		fs   func(t *testing.T) (FS, string)
	}{
		{"os", func(t *testing.T) (FS, string) { return OS(), t.TempDir() }},
		{"mem", func(t *testing.T) (FS, string) { return NewMem(), "/d" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			base, dir := c.fs(t)
			m := NewMeter(classify, "log", "other")
			fs := Metered(base, m)
			if mem, ok := base.(*MemFS); ok {
				mem.SetCapacity(1 << 20)
				if sp, err := fs.Space(dir); err != nil || sp.Total != 1<<20 {
					t.Fatalf("Metered(MemFS).Space = %+v, %v: the file system's size must pass through", sp, err)
				}
			}
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			must(fs.MkdirAll(filepath.Join(dir, "log"), 0o755))
			f, err := fs.Create(filepath.Join(dir, "log", "a"))
			must(err)
			_, err = f.WriteAt(make([]byte, 1000), 0)
			must(err)
			must(f.Close())
			f, err = fs.Open(filepath.Join(dir, "log", "a"))
			must(err)
			_, err = f.WriteAt(make([]byte, 24), 1000)
			must(err)
			a, ok := f.(WriteAccounter)
			if !ok {
				t.Fatal("a metered file is not a WriteAccounter")
			}
			a.AccountWrite(4096)
			if f.Fd() == NoFd != (c.name == "mem") {
				t.Fatalf("Fd %v is not the wrapped file's", f.Fd())
			}
			must(f.Close())
			must(WriteFile(fs, filepath.Join(dir, "ckpt"), make([]byte, 7)))
			if got, want := m.Written("log"), int64(1000+24+4096); got != want {
				t.Errorf("log: %d bytes, want %d", got, want)
			}
			if got := m.Written("other"); got != 7 {
				t.Errorf("other: %d bytes, want 7", got)
			}
			if got := m.Written("nonsense"); got != 0 {
				t.Errorf("an unknown class reads %d", got)
			}
		})
	}
}

func TestProcessWriteBytes(t *testing.T) {
	before, err := ProcessWriteBytes(0)
	if errors.Is(err, ErrNoProcIO) && os.Getenv("CI") != "true" {
		t.Skipf("no /proc/self/io here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	after, err := ProcessWriteBytes(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Counted when pages are dirtied, so before any writeback.
	if after-before < 1<<20 {
		t.Fatalf("write_bytes grew by %d after writing 1 MiB", after-before)
	}
	if _, err := ProcessWriteBytes(1 << 30); err == nil {
		t.Fatal("no error for a pid above pid_max")
	}
}
