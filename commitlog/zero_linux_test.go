//go:build linux

package commitlog

import (
	"math/rand"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/raftmq/raftmq/internal/testseed"
	"github.com/raftmq/raftmq/mmap"
	"github.com/raftmq/raftmq/vfs"
	"golang.org/x/sys/unix"
)

// TestZeroFromMatchesIsZero: on a real preallocated mapped file, the
// SEEK_DATA-assisted check agrees with reading every byte, for data in
// unwritten extents (dirty pages), flushed data and pages zeroed again.
func TestZeroFromMatchesIsZero(t *testing.T) {
	const size = 4 << 20
	rng := rand.New(rand.NewSource(testseed.Seed(t)))
	f, err := mmap.Open(vfs.OS(), filepath.Join(t.TempDir(), "seg"), size, mmap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := f.Bytes()
	if _, ok := f.(fdFile); !ok {
		t.Fatal("the real mapping exposes no descriptor: zeroFrom would read every byte")
	}
	check := func(what string) {
		t.Helper()
		for i := 0; i < 50; i++ {
			from := rng.Intn(size + 1)
			if got, want := zeroFrom(f, b[from:], int64(from)), isZero(b[from:]); got != want {
				t.Fatalf("%s: zeroFrom(%d) = %v, isZero = %v", what, from, got, want)
			}
		}
	}
	check("fresh")
	for round := 0; round < 4; round++ {
		pos := rng.Intn(size)
		b[pos] = byte(1 + rng.Intn(255))
		check("dirty byte")
		if round%2 == 1 {
			if err := f.Flush(0, size); err != nil {
				t.Fatal(err)
			}
			check("flushed")
		}
		if err := f.Zero(int64(pos), int64(pos+1)); err != nil {
			t.Fatal(err)
		}
		check("zeroed again")
	}
}

// TestZeroFromSkipsPreTouchedSegment: a preallocated segment whose zero
// pages a previous process faulted in (the allocator's pre-touch) is found
// zero without being read, as after a kill -9: its pages are not resident
// afterwards. A dirty page in it is still found.
func TestZeroFromSkipsPreTouchedSegment(t *testing.T) {
	const size = 16 << 20
	path := filepath.Join(t.TempDir(), "seg")
	touched, err := mmap.Open(vfs.OS(), path, size, mmap.Options{PreTouch: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := resident(t, touched.Bytes()); n < size/4096/2 {
		t.Fatalf("pre-touch left only %d of %d pages resident: the test would prove nothing", n, size/4096)
	}
	if err := touched.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := mmap.Open(vfs.OS(), path, size, mmap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !zeroFrom(f, f.Bytes(), 0) {
		t.Fatal("pre-touched fresh segment is not zero")
	}
	if n := resident(t, f.Bytes()); n > 64 {
		t.Fatalf("zeroFrom faulted in %d pages of a zero segment, want it read without reading", n)
	}
	const pos = 5<<20 + 123
	f.Bytes()[pos] = 7 // dirty, not flushed: only the page cache knows
	if zeroFrom(f, f.Bytes()[4<<20:], 4<<20) {
		t.Fatal("a dirty byte at 5 MiB was not found")
	}
}

// resident counts the pages of b in the page cache (mincore).
func resident(t *testing.T, b []byte) int {
	t.Helper()
	vec := make([]byte, (len(b)+4095)/4096)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// BenchmarkZeroFromFreshSegment: the clean-end check over a fresh 64 MiB
// preallocated segment, against reading it all (isZero over the mapping).
func BenchmarkZeroFromFreshSegment(b *testing.B) {
	const size = 64 << 20
	for _, tc := range []struct {
		name string
		fn   func(f mmap.File) bool
	}{
		{"seek-data", func(f mmap.File) bool { return zeroFrom(f, f.Bytes(), 0) }},
		{"read-all", func(f mmap.File) bool { return isZero(f.Bytes()) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			dir := b.TempDir()
			b.SetBytes(size)
			for i := 0; i < b.N; i++ {
				f, err := mmap.Open(vfs.OS(), filepath.Join(dir, "seg"), size, mmap.Options{})
				if err != nil {
					b.Fatal(err)
				}
				if !tc.fn(f) {
					b.Fatal("fresh segment is not zero")
				}
				b.StopTimer()
				f.Close()
				if err := vfs.OS().Remove(filepath.Join(dir, "seg")); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
