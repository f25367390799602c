//go:build linux

package mmap

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/raftmq/raftmq/vfs"
	"golang.org/x/sys/unix"
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

// The kernel here has MADV_POPULATE_READ (Linux 5.14), so Touch takes the
// one-syscall path rather than the per-page reads; under CI a refusal is a
// failure (the machine CI runs on is the one the store is tuned for).
func TestPopulateReadWorksHere(t *testing.T) {
	f, err := Open(vfs.OS(), filepath.Join(t.TempDir(), FileName(0)), 1<<20, Options{})
	must(t, err)
	defer f.Close()
	if err := populateRead(f.Bytes()); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("madvise(MADV_POPULATE_READ): %v", err)
		}
		t.Skipf("SKIP (Touch falls back to a read per page): madvise(MADV_POPULATE_READ): %v", err)
	}
}

// BenchmarkFaultIn faults in 4 MiB of a fresh fallocated file per
// iteration, by madvise(MADV_POPULATE_READ) or by reading one byte per
// page (what Touch falls back to), then copies into the pages as a writer
// would ("+write"): MB/s of file made resident.
func BenchmarkFaultIn(b *testing.B) {
	const chunk = touchChunk
	for _, mode := range []string{"populate", "reads", "populate+write", "reads+write", "write", "popwrite+write", "pwrite"} {
		b.Run(mode, func(b *testing.B) {
			dir := b.TempDir()
			data := make([]byte, chunk)
			var f File
			off, n := int64(benchFileSize), 0
			defer func() {
				if f != nil {
					f.Close()
				}
			}()
			b.SetBytes(chunk)
			for b.Loop() {
				if off == benchFileSize {
					b.StopTimer()
					if f != nil {
						f.Close()
						os.Remove(f.Name())
					}
					var err error
					if f, err = Open(vfs.OS(), filepath.Join(dir, FileName(int64(n)*benchFileSize)), benchFileSize, Options{}); err != nil {
						b.Fatal(err)
					}
					off, n = 0, n+1
					b.StartTimer()
				}
				page := f.Bytes()[off : off+chunk]
				switch mode {
				case "populate", "populate+write":
					if err := populateRead(page); err != nil {
						b.Skipf("madvise(MADV_POPULATE_READ): %v", err)
					}
				case "reads", "reads+write":
					sink += touchPages(page)
				case "popwrite+write":
					if err := unix.Madvise(page, unix.MADV_POPULATE_WRITE); err != nil {
						b.Fatal(err)
					}
				case "pwrite":
					if _, err := f.(*mappedFile).f.WriteAt(data, off); err != nil {
						b.Fatal(err)
					}
					off += chunk
					continue
				}
				if mode != "populate" && mode != "reads" {
					copy(page, data)
				}
				off += chunk
			}
		})
	}
}

var sink uint64
