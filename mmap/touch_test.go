//go:build linux

package mmap

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/raftmq/raftmq/vfs"
)

// Touch faults in exactly the pages of its range (the file is mapped
// Random, so no read-around adds neighbours), clamps a range that runs past
// the end, and only reads.
func TestTouchFaultsInItsRange(t *testing.T) {
	const size, page = 16 << 20, 4096
	f, err := Open(vfs.OS(), filepath.Join(t.TempDir(), FileName(0)), size, Options{Random: true})
	must(t, err)
	defer f.Close()
	if os.Getpagesize() != page {
		t.Skipf("page size %d, the test counts 4 KiB pages", os.Getpagesize())
	}
	before := procWriteBytes(t)
	if sum := Touch(f, 4<<20, 8<<20); sum != 0 {
		t.Fatalf("a fresh file read back sum %d, want zeros", sum)
	}
	_ = Touch(f, size-page, size+(1<<30)) // clamped to the file
	_ = Touch(f, -page, 0)                // nothing
	for i, in := range residentPages(t, f.Bytes()) {
		want := i >= (4<<20)/page && i < (8<<20)/page || i == size/page-1
		if in != want {
			t.Fatalf("page %d (offset %d) resident %v, want %v", i, i*page, in, want)
		}
	}
	if d := procWriteBytes(t) - before; d > 1<<20 {
		t.Fatalf("touching dirtied %d bytes", d)
	}
}

// On the heap twin Touch reads nothing: its bytes are plain memory, and a
// read beside a writer would be a data race.
func TestTouchSkipsTheHeapTwin(t *testing.T) {
	f, err := Open(vfs.NewMem(), FileName(0), 1<<20, Options{Heap: true})
	must(t, err)
	defer f.Close()
	b := f.Bytes()
	for i := range b {
		b[i] = 1
	}
	if sum := Touch(f, 0, int64(len(b))); sum != 0 {
		t.Fatalf("Touch read %d pages of the heap twin", sum)
	}
}
