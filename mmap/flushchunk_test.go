//go:build linux

package mmap

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/raftmq/raftmq/internal/testenv"
	"github.com/raftmq/raftmq/vfs"
)

// cachestat is cachestat(2) (Linux 6.5) on n bytes of f's file from off;
// the test is skipped where the kernel lacks it (failed under CI).
func cachestat(t *testing.T, f File, off, n int64, st *unix.Cachestat_t) error {
	t.Helper()
	fd, ok := f.(interface{ Fd() uintptr })
	if !ok {
		t.Fatalf("%T has no descriptor", f)
	}
	err := unix.Cachestat(uint(fd.Fd()), &unix.CachestatRange{Off: uint64(off), Len: uint64(n)}, st, 0)
	if errors.Is(err, unix.ENOSYS) {
		testenv.Require(t, "cachestat(2) (Linux 6.5): "+err.Error())
	}
	return err
}

// A Flush of a range larger than flushChunk, not aligned to it, writes the
// range a chunk at a time and then msyncs it: no page of it is left dirty,
// the bytes are there after reopening, and a page outside it stays dirty.
func TestFlushLargeRange(t *testing.T) {
	const size = 4 << 20
	name := filepath.Join(t.TempDir(), FileName(0))
	f, err := Open(vfs.OS(), name, size, Options{})
	must(t, err)
	data := bytes.Repeat([]byte("chunked flush "), (3*flushChunk+5000)/14)
	from := int64(1000)
	to := from + int64(len(data))
	must(t, WriteAt(f, data, from))
	must(t, WriteAt(f, []byte("outside"), size-4096))
	must(t, f.Flush(from, to))
	var st unix.Cachestat_t
	must(t, cachestat(t, f, from&^4095, (to+4095)&^4095-from&^4095, &st))
	if st.Dirty+st.Writeback != 0 {
		t.Fatalf("%d pages of the flushed range still dirty or under write-back", st.Dirty+st.Writeback)
	}
	must(t, cachestat(t, f, size-4096, 4096, &st))
	if st.Dirty == 0 {
		t.Fatal("the page outside the range was written too: the test cannot tell the range from the file")
	}
	must(t, f.Close())
	g, err := Open(vfs.OS(), name, size, Options{})
	must(t, err)
	defer g.Close()
	if !bytes.Equal(g.Bytes()[from:to], data) {
		t.Fatal("reopened: the flushed range differs")
	}
}
