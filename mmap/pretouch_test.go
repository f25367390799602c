//go:build linux

package mmap

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/raftmq/raftmq/vfs"
)

// preTouch stops at the next chunk once abort is closed, so an allocator's
// Close never waits for a whole segment to be faulted in. It only reads.
func TestPreTouchStopsOnAbort(t *testing.T) {
	data := make([]byte, 3*touchChunk)
	for i := range data {
		data[i] = 1
	}
	abort := make(chan struct{})
	// The sum is 0 where madvise populated the pages, one per page where
	// it read them.
	n, sum := preTouch(data[:touchChunk], abort)
	if n != touchChunk || sum != 0 && sum != touchChunk/TouchPage {
		t.Fatalf("with abort open: touched %d bytes, read sum %d; want %d, 0 or %d", n, sum, touchChunk, touchChunk/TouchPage)
	}
	close(abort)
	if n, _ := preTouch(data[touchChunk:], abort); n != 0 {
		t.Fatalf("touched %d bytes after abort", n)
	}
	for i := range data {
		if data[i] != 1 {
			t.Fatalf("byte %d changed: a pre-touch must only read", i)
		}
	}
}

// A pre-touched file is resident in the page cache and mapped (mincore),
// yet none of its pages is dirty: the process's write_bytes (bytes it
// dirtied, /proc/self/io) barely moves. Writing a zero per page dirtied the
// whole file, and the kernel wrote those zeros to disk before the data.
func TestPreTouchFaultsInWithoutDirtying(t *testing.T) {
	const size = 64 << 20
	before := procWriteBytes(t)
	f, err := Open(vfs.OS(), filepath.Join(t.TempDir(), FileName(0)), size, Options{PreTouch: true})
	must(t, err)
	defer f.Close()
	dirtied := procWriteBytes(t) - before
	resident := 0
	for _, in := range residentPages(t, f.Bytes()) {
		if in {
			resident++
		}
	}
	if pages := size / os.Getpagesize(); resident < pages*9/10 {
		t.Fatalf("%d of %d pages resident after a pre-touch", resident, pages)
	}
	if dirtied > size/8 {
		t.Fatalf("the pre-touch dirtied %d bytes of a %d-byte file", dirtied, size)
	}
}

// residentPages reports for each page of the mapping b whether it is in
// memory and mapped (mincore).
func residentPages(t *testing.T, b []byte) []bool {
	t.Helper()
	vec := make([]byte, (len(b)+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	in := make([]bool, len(vec))
	for i, v := range vec {
		in[i] = v&1 == 1
	}
	return in
}

func procWriteBytes(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Skipf("no /proc/self/io: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		var n int64
		if _, err := fmt.Sscanf(l, "write_bytes: %d", &n); err == nil {
			return n
		}
	}
	t.Skip("no write_bytes in /proc/self/io")
	return 0
}
