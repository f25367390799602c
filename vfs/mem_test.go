package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/raftmq/raftmq/internal/testseed"
	"math/rand"
	"runtime"
	"strings"
	"testing"
)

// testSeed is the shared seed source (flag -seed, RAFTMQ_SEED, clock).
func testSeed(t testing.TB) int64 { return testseed.Seed(t) }

// crashSetup writes "durable" and syncs it, then leaves two unsynced writes
// and an unsynced truncation-extension behind.
func crashSetup(t *testing.T) *MemFS {
	m := NewMem()
	must(t, m.MkdirAll("/d", 0o755))
	f, err := m.Create("/d/f")
	must(t, err)
	must(t, m.SyncDir("/d"))
	_, err = f.WriteAt([]byte("durable"), 0)
	must(t, err)
	must(t, f.Sync())
	_, err = f.WriteAt([]byte("XY"), 0)
	must(t, err)
	_, err = f.WriteAt(bytes.Repeat([]byte{'u'}, 3*TearPage), 7)
	must(t, err)
	must(t, f.Close())
	return m
}

func TestCrashCloneDropKeep(t *testing.T) {
	m := crashSetup(t)
	before, err := m.ReadFile("/d/f")
	must(t, err)
	drop := m.CrashClone(CrashOptions{Mode: DropUnsynced})
	if got, _ := drop.ReadFile("/d/f"); string(got) != "durable" {
		t.Fatalf("DropUnsynced = %q, want %q", got, "durable")
	}
	keep := m.CrashClone(CrashOptions{Mode: KeepUnsynced})
	if got, _ := keep.ReadFile("/d/f"); !bytes.Equal(got, before) {
		t.Fatalf("KeepUnsynced lost data: %d bytes vs %d", len(got), len(before))
	}
	// The clone is independent and its content is durable.
	if after, _ := m.ReadFile("/d/f"); !bytes.Equal(after, before) {
		t.Fatal("CrashClone changed the original")
	}
	again := keep.CrashClone(CrashOptions{Mode: DropUnsynced})
	if got, _ := again.ReadFile("/d/f"); !bytes.Equal(got, before) {
		t.Fatal("content of a clone is not durable")
	}
	names, err := drop.List("/d")
	must(t, err)
	if len(names) != 1 || names[0] != "f" {
		t.Fatalf("clone List = %v", names)
	}
}

// TestCrashCloneTear checks that every torn outcome lies between the
// durable and the full content: each byte is either the durable byte, or the
// byte of some unsynced write covering it, and in-order tearing keeps a
// prefix.
func TestCrashCloneTear(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewSource(seed))
	m := crashSetup(t)
	full, _ := m.ReadFile("/d/f")
	seen := map[int]bool{}
	for i := 0; i < 200; i++ {
		c := m.CrashClone(CrashOptions{Mode: TearUnsynced, Rand: r})
		got, _ := c.ReadFile("/d/f")
		seen[len(got)] = true
		if len(got) < len("durable") || len(got) > len(full) {
			t.Fatalf("torn length %d outside [%d,%d]", len(got), len("durable"), len(full))
		}
		if !bytes.Equal(got[7:], full[7:len(got)]) {
			t.Fatal("torn tail is not a prefix of the unsynced write")
		}
		if len(got) > 7 && string(got[:2]) != "XY" {
			t.Fatal("second write kept without the first (order broken)")
		}
	}
	if len(seen) < 3 {
		t.Fatalf("tearing produced only lengths %v", seen)
	}
}

func TestCrashCloneTearReorder(t *testing.T) {
	r := rand.New(rand.NewSource(testSeed(t)))
	m := crashSetup(t)
	full, _ := m.ReadFile("/d/f")
	holes := false
	for i := 0; i < 200; i++ {
		c := m.CrashClone(CrashOptions{Mode: TearUnsynced, Rand: r, Reorder: true})
		got, _ := c.ReadFile("/d/f")
		for j := 7; j < len(got); j++ {
			switch got[j] {
			case 'u':
			case 0:
				holes = true
			default:
				t.Fatalf("byte %d = %q: neither written nor zero", j, got[j])
			}
		}
		if len(got) > len(full) {
			t.Fatalf("length %d > %d", len(got), len(full))
		}
	}
	if !holes {
		t.Fatal("Reorder never left an unwritten page before a written one")
	}
}

// workload is a small scripted sequence of mutating operations; it stops at
// the first error.
func workload(m *MemFS) error {
	if err := m.MkdirAll("/w", 0o755); err != nil {
		return err
	}
	f, err := m.Create("/w/log")
	if err != nil {
		return err
	}
	defer f.Close()
	if err := m.SyncDir("/w"); err != nil {
		return err
	}
	for i := 0; i < 3; i++ {
		if _, err := f.WriteAt([]byte(fmt.Sprintf("rec%d;", i)), int64(5*i)); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
	}
	if err := m.Rename("/w/log", "/w/log2"); err != nil {
		return err
	}
	return m.SyncDir("/w")
}

func TestCrashAtEveryOp(t *testing.T) {
	total := NewMem()
	must(t, workload(total))
	n := total.OpCount()
	if n != 11 {
		t.Fatalf("workload ran %d ops, want 11", n)
	}
	for k := 0; k <= n; k++ {
		m := NewMem()
		m.CrashAt(k, CrashOptions{Mode: DropUnsynced})
		err := workload(m)
		c, crashed := m.Crashed()
		if k == n {
			if err != nil || crashed {
				t.Fatalf("k=%d: crash past the end fired: %v", k, err)
			}
			continue
		}
		if !errors.Is(err, ErrCrashed) || !crashed {
			t.Fatalf("k=%d: err=%v crashed=%v", k, err, crashed)
		}
		if m.OpCount() != k {
			t.Fatalf("k=%d: OpCount after crash = %d", k, m.OpCount())
		}
		if _, err := m.List("/"); !errors.Is(err, ErrCrashed) {
			t.Fatalf("k=%d: read after crash: %v", k, err)
		}
		checkCrashState(t, k, c)
	}
}

// checkCrashState verifies the clone holds exactly the records synced
// before op k (ops: 0 mkdir, 1 create, 2 syncdir, 3+2i write i, 4+2i sync
// i, 9 rename, 10 syncdir): the file exists once its directory was synced
// after the Create, and keeps its old name until the directory is synced
// after the Rename (the crash at op 10 comes before that).
func checkCrashState(t *testing.T, k int, c *MemFS) {
	t.Helper()
	if _, err := c.ReadFile("/w/log2"); err == nil {
		t.Fatalf("k=%d: the rename is durable before its SyncDir", k)
	}
	got, err := c.ReadFile("/w/log")
	if k <= 2 {
		if err == nil {
			t.Fatalf("k=%d: file exists before its directory was synced", k)
		}
		return
	}
	must(t, err)
	synced := 0
	for i := 0; i < 3; i++ {
		if k > 4+2*i {
			synced = i + 1
		}
	}
	want := ""
	for i := 0; i < synced; i++ {
		want += fmt.Sprintf("rec%d;", i)
	}
	if string(got) != want {
		t.Fatalf("k=%d: clone has %q, want %q", k, got, want)
	}
}

func TestHelpers(t *testing.T) {
	m := NewMem()
	f, err := m.Create("/f")
	must(t, err)
	must(t, m.SyncDir("/"))
	_, err = f.WriteAt([]byte{0, 0, 0, 0}, 0)
	must(t, err)
	must(t, f.Sync())
	must(t, m.FlipBit("/f", 2, 3))
	got, _ := m.ReadFile("/f")
	if got[2] != 8 {
		t.Fatalf("FlipBit: %v", got)
	}
	must(t, m.TruncateFile("/f", 1))
	c := m.CrashClone(CrashOptions{Mode: DropUnsynced})
	if got, _ := c.ReadFile("/f"); len(got) != 1 {
		t.Fatalf("TruncateFile not durable: %v", got)
	}
	if err := m.FlipBit("/f", 5, 0); err == nil {
		t.Fatal("FlipBit past the end succeeded")
	}
	if f.Fd() != NoFd {
		t.Fatal("MemFS file has an Fd")
	}
}

func TestMemConcurrent(t *testing.T) {
	m := NewMem()
	must(t, m.MkdirAll("/c", 0o755))
	done := make(chan error)
	for g := 0; g < 4; g++ {
		go func(g int) {
			f, err := m.Create(fmt.Sprintf("/c/%d", g))
			for i := 0; err == nil && i < 100; i++ {
				_, err = f.WriteAt([]byte{byte(i)}, int64(i))
				if err == nil && i%10 == 0 {
					err = f.Sync()
				}
				if err == nil {
					_, err = m.List("/c")
				}
			}
			done <- err
		}(g)
	}
	for g := 0; g < 4; g++ {
		must(t, <-done)
	}
	must(t, m.SyncDir("/c"))
	c := m.CrashClone(CrashOptions{Mode: DropUnsynced})
	for g := 0; g < 4; g++ {
		got, _ := c.ReadFile(fmt.Sprintf("/c/%d", g))
		if len(got) != 91 {
			t.Fatalf("file %d: %d durable bytes, want 91", g, len(got))
		}
	}
}

// Directory entries are durable only once their directory is synced:
// created, renamed and removed names revert in a crash clone until then, a
// renamed directory keeps its durable entries, and MkdirAll is durable at
// once. KeepUnsynced keeps every name.
func TestDirectoryEntriesNeedSyncDir(t *testing.T) {
	m := NewMem()
	must(t, m.MkdirAll("/a/b", 0o755))
	write := func(name, content string) {
		f, err := m.Create(name)
		must(t, err)
		_, err = f.WriteAt([]byte(content), 0)
		must(t, err)
		must(t, f.Sync())
		must(t, f.Close())
	}
	names := func(c *MemFS) string { return strings.Join(sortedKeys(c.nodes), " ") }
	drop := CrashOptions{Mode: DropUnsynced}
	write("/a/b/f", "one")
	if got := names(m.CrashClone(drop)); got != "/a /a/b" {
		t.Fatalf("a created file is durable without SyncDir: %s", got)
	}
	must(t, m.SyncDir("/a/b"))
	write("/a/b/g", "two")
	must(t, m.Rename("/a/b/f", "/a/b/h"))
	if got := names(m.CrashClone(drop)); got != "/a /a/b /a/b/f" {
		t.Fatalf("before the second SyncDir: %s", got)
	}
	must(t, m.SyncDir("/a/b"))
	must(t, m.Remove("/a/b/g"))
	must(t, m.Rename("/a/b", "/a/c"))
	c := m.CrashClone(drop)
	if got := names(c); got != "/a /a/b /a/b/g /a/b/h" {
		t.Fatalf("the removal and the directory rename are durable without SyncDir: %s", got)
	}
	if got, _ := c.ReadFile("/a/b/h"); string(got) != "one" {
		t.Fatalf("renamed file holds %q", got)
	}
	must(t, m.SyncDir("/a"))
	if got := names(m.CrashClone(drop)); got != "/a /a/c /a/c/g /a/c/h" {
		t.Fatalf("a synced directory rename moves the directory's durable entries: %s", got)
	}
	if got := names(m.CrashClone(CrashOptions{Mode: KeepUnsynced})); got != "/a /a/c /a/c/h" {
		t.Fatalf("KeepUnsynced: %s", got)
	}
}

// Space: unknown without a capacity; with one, the files' bytes are used
// (a hard-linked file once) and the rest is free. The OS's comes from statfs.
func TestSpace(t *testing.T) {
	m := NewMem()
	if _, err := m.Space("/d"); !errors.Is(err, ErrNoSpaceInfo) {
		t.Fatalf("Space without a capacity: %v, want ErrNoSpaceInfo", err)
	}
	if err := m.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := m.Create("/d/a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 3000), 0); err != nil {
		t.Fatal(err)
	}
	if err := m.Link("/d/a", "/d/b"); err != nil {
		t.Fatal(err)
	}
	m.SetCapacity(10000)
	sp, err := m.Space("/d")
	if err != nil || sp != (Space{Total: 10000, Free: 7000, Avail: 7000}) {
		t.Fatalf("Space = %+v, %v; want 10000 total, 7000 free", sp, err)
	}
	osSpace, err := OS().Space(t.TempDir())
	if errors.Is(err, ErrNoSpaceInfo) && runtime.GOOS != "linux" {
		return // statfs is Linux-only here
	}
	if err != nil || osSpace.Total == 0 || osSpace.Avail > osSpace.Free || osSpace.Free > osSpace.Total {
		t.Fatalf("OS Space = %+v, %v", osSpace, err)
	}
}
