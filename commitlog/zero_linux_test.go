//go:build linux

package commitlog

import (
	"math/rand"
	"path/filepath"
	"testing"

	"github.com/raftmq/raftmq/internal/testseed"
	"github.com/raftmq/raftmq/mmap"
	"github.com/raftmq/raftmq/vfs"
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
