package mmap

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/raftmq/raftmq/vfs"
)

// TestFlushIsMetered: on a vfs.Metered file system, a Flush counts the
// page-aligned cover of the flushed range for the real mapping (msync
// writes whole pages) and the flushed bytes for the heap twin (its WriteAt);
// a pre-touch reads, dirties nothing and counts nothing.
func TestFlushIsMetered(t *testing.T) {
	const size = 256 << 10
	page := int64(os.Getpagesize())
	cover := func(from, to int64) int64 { return (to+page-1)&^(page-1) - from&^(page-1) }
	mapped := cover(100, 5000) + cover(5000, 5100) // 3 pages of 4 KiB: the tail page twice
	for _, c := range []struct {
		name      string
		opts      Options
		wantFlush int64 // for Flush(100, 5000) then Flush(5000, 5100)
		wantOpen  int64
	}{
		{"mmap", Options{}, mapped, 0},
		{"mmap-pretouch", Options{PreTouch: true}, mapped, 0},
		{"heap", Options{Heap: true}, 4900 + 100, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !mmapSupported && !c.opts.Heap {
				t.Skip("no real mmap on this platform")
			}
			m := vfs.NewMeter(func(string) string { return "data" }, "data")
			fs := vfs.Metered(vfs.OS(), m)
			f, err := Open(fs, filepath.Join(t.TempDir(), FileName(0)), size, c.opts)
			must(t, err)
			defer f.Close()
			if got := m.Written("data"); got != c.wantOpen {
				t.Fatalf("after open: %d bytes counted, want %d", got, c.wantOpen)
			}
			copy(f.Bytes()[100:5100], make([]byte, 5000))
			must(t, f.Flush(100, 5000))
			must(t, f.Flush(5000, 5100))
			if got := m.Written("data") - c.wantOpen; got != c.wantFlush {
				t.Fatalf("flushes counted %d bytes, want %d", got, c.wantFlush)
			}
		})
	}
}
