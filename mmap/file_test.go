package mmap

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"github.com/raftmq/raftmq/vfs"
)

// impl is one way to get a File: real mmap on the OS, heap twin on the OS,
// heap twin on a MemFS.
type impl struct {
	name string
	fs   func(t *testing.T) (vfs.FS, string)
	opts Options
}

var impls = []impl{
	{"mmap-os", osDir, Options{}},
	{"heap-os", osDir, Options{Heap: true}},
	{"heap-mem", memDir, Options{}},
}

func osDir(t *testing.T) (vfs.FS, string) { return vfs.OS(), t.TempDir() }

func memDir(t *testing.T) (vfs.FS, string) {
	m := vfs.NewMem()
	must(t, m.MkdirAll("/q", 0o755))
	return m, "/q"
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestFileConformance(t *testing.T) {
	for _, im := range impls {
		t.Run(im.name, func(t *testing.T) {
			fsys, dir := im.fs(t)
			name := filepath.Join(dir, FileName(0))
			f, err := Open(fsys, name, 3*4096, im.opts)
			must(t, err)
			if f.Size() != 3*4096 || len(f.Bytes()) != 3*4096 || f.Name() != name {
				t.Fatalf("size %d len %d name %q", f.Size(), len(f.Bytes()), f.Name())
			}
			if !bytes.Equal(f.Bytes(), make([]byte, 3*4096)) {
				t.Fatal("fresh file is not zero")
			}
			copy(f.Bytes()[4000:], "hello across a page")
			must(t, f.Flush(4000, 4019))
			must(t, f.WillNeed())
			must(t, f.DontNeed())
			if err := f.Flush(10, 3*4096+1); !errors.Is(err, ErrOutOfRange) {
				t.Fatalf("flush past end: %v", err)
			}
			must(t, f.Close())
			if err := f.Flush(0, 1); !errors.Is(err, ErrClosed) {
				t.Fatalf("flush after close: %v", err)
			}
			g, err := Open(fsys, name, 3*4096, im.opts)
			must(t, err)
			if got := string(g.Bytes()[4000:4019]); got != "hello across a page" {
				t.Fatalf("reopened: %q", got)
			}
			must(t, g.Zero(4006, 4012))
			if got := string(g.Bytes()[4000:4019]); got != "hello \x00\x00\x00\x00\x00\x00 a page" {
				t.Fatalf("after Zero: %q", got)
			}
			must(t, g.Close())
			h, err := Open(fsys, name, 3*4096, im.opts)
			must(t, err)
			if got := string(h.Bytes()[4000:4019]); got != "hello \x00\x00\x00\x00\x00\x00 a page" {
				t.Fatalf("Zero not durable: %q", got)
			}
			must(t, h.Close())
			if _, err := Open(fsys, name, 4096, im.opts); !errors.Is(err, ErrFileSize) {
				t.Fatalf("wrong size: %v", err)
			}
			names, err := fsys.List(dir)
			must(t, err)
			if len(names) != 1 {
				t.Fatalf("directory holds %v", names)
			}
		})
	}
}

func TestRealMapping(t *testing.T) {
	f, err := Open(vfs.OS(), filepath.Join(t.TempDir(), "x"), 4096, Options{PreTouch: true})
	must(t, err)
	defer f.Close()
	if _, ok := f.(*mappedFile); !ok && mmapSupported {
		t.Fatalf("OS file opened as %T", f)
	}
	m, err := Open(vfs.NewMem(), "/x", 4096, Options{})
	must(t, err)
	defer m.Close()
	if _, ok := m.(*heapFile); !ok {
		t.Fatalf("MemFS file opened as %T", m)
	}
}

// TestHeapCrashDropsUnflushed: after a power loss, a heap file over MemFS
// holds exactly the flushed bytes.
func TestHeapCrashDropsUnflushed(t *testing.T) {
	m := vfs.NewMem()
	f, err := Open(m, "/f", 8192, Options{})
	must(t, err)
	copy(f.Bytes()[0:], "flushed-")
	must(t, f.Flush(0, 8))
	copy(f.Bytes()[8:], "unflushed")
	copy(f.Bytes()[5000:], "also lost")
	must(t, f.Flush(100, 100)) // empty range: no-op
	c := m.CrashClone(vfs.CrashOptions{Mode: vfs.DropUnsynced})
	g, err := Open(c, "/f", 8192, Options{})
	must(t, err)
	defer g.Close()
	want := make([]byte, 8192)
	copy(want, "flushed-")
	if !bytes.Equal(g.Bytes(), want) {
		t.Fatalf("crash image differs: %q", g.Bytes()[:32])
	}
	must(t, f.Close())
}

// TestCreateCrashAtomic: a crash at any point while Open creates a file
// leaves either no file or a full-size one (plus a .tmp OpenQueue removes).
func TestCreateCrashAtomic(t *testing.T) {
	for k := 0; ; k++ {
		m := vfs.NewMem()
		must(t, m.MkdirAll("/q", 0o755))
		m.CrashAt(k, vfs.CrashOptions{Mode: vfs.DropUnsynced})
		f, err := Open(m, "/q/"+FileName(0), 4096, Options{})
		c, crashed := m.Crashed()
		if !crashed {
			must(t, err)
			f.Close()
			if k < 4 {
				t.Fatalf("create took only %d ops", k)
			}
			return
		}
		q, err := OpenQueue(c, QueueConfig{Dir: "/q", FileSize: 4096})
		must(t, err)
		if n := len(q.Segments()); n > 1 {
			t.Fatalf("k=%d: %d segments", k, n)
		}
		must(t, q.Close())
		names, _ := c.List("/q")
		if len(names) > 1 {
			t.Fatalf("k=%d: leftovers %v", k, names)
		}
	}
}

func TestFileNames(t *testing.T) {
	if got := FileName(1073741824); got != "00000000001073741824" {
		t.Fatalf("FileName = %q", got)
	}
	for _, v := range []int64{0, 1, 1 << 30, 1<<63 - 1} {
		got, err := ParseFileName(FileName(v))
		if err != nil || got != v {
			t.Fatalf("round trip %d: %d %v", v, got, err)
		}
	}
	for _, bad := range []string{"", "0", "0000000000000000000a", "000000000000000000000",
		"+0000000000000000001", "-0000000000000000001", "99999999999999999999", "0000000000000000000 "} {
		if _, err := ParseFileName(bad); !errors.Is(err, ErrFileName) {
			t.Fatalf("ParseFileName(%q) = %v", bad, err)
		}
	}
}

func FuzzParseFileName(f *testing.F) {
	f.Add("00000000001073741824")
	f.Add("0000000000000000000x")
	f.Add("99999999999999999999")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseFileName(s)
		if err == nil && FileName(v) != s {
			t.Fatalf("accepted %q, which is not FileName(%d)", s, v)
		}
	})
}

// TestHeapTwinIsAMappingView: on MemFS the heap twin's bytes are a mapping
// view, so a crash with Writeback sees what was written into Bytes() and
// never flushed (as the kernel would write it back); after Close they are
// not looked at any more.
func TestHeapTwinIsAMappingView(t *testing.T) {
	fs := vfs.NewMem()
	f, err := Open(fs, "seg", 1<<16, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.SyncDir("."); err != nil {
		t.Fatal(err)
	}
	copy(f.Bytes()[5000:], "written, not flushed")
	read := func(opts vfs.CrashOptions) []byte {
		t.Helper()
		b, err := fs.CrashClone(opts).ReadFile("seg")
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if got := read(vfs.CrashOptions{Mode: vfs.KeepUnsynced, Writeback: true}); string(got[5000:5020]) != "written, not flushed" {
		t.Fatalf("kill -9 with write-back: %q", got[5000:5020])
	}
	if got := read(vfs.CrashOptions{Mode: vfs.KeepUnsynced}); got[5000] != 0 {
		t.Fatal("without write-back an unflushed heap write reached the file")
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got := read(vfs.CrashOptions{Mode: vfs.KeepUnsynced, Writeback: true}); got[5000] != 0 {
		t.Fatal("a closed heap twin's bytes reached the file")
	}
}
