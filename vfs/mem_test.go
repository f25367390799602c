package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/raftmq/raftmq/internal/testseed"
	"math/rand"
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
	if n != 10 {
		t.Fatalf("workload ran %d ops, want 10", n)
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
// before op k (ops: 0 mkdir, 1 create, 2+2i write i, 3+2i sync i, 8 rename,
// 9 syncdir).
func checkCrashState(t *testing.T, k int, c *MemFS) {
	t.Helper()
	name := "/w/log"
	if k > 8 {
		name = "/w/log2"
	}
	got, err := c.ReadFile(name)
	if k <= 1 {
		if err == nil {
			t.Fatalf("k=%d: file exists before Create", k)
		}
		return
	}
	must(t, err)
	synced := 0
	for i := 0; i < 3; i++ {
		if k > 3+2*i {
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
	c := m.CrashClone(CrashOptions{Mode: DropUnsynced})
	for g := 0; g < 4; g++ {
		got, _ := c.ReadFile(fmt.Sprintf("/c/%d", g))
		if len(got) != 91 {
			t.Fatalf("file %d: %d durable bytes, want 91", g, len(got))
		}
	}
}
