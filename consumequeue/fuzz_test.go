package consumequeue

import (
	"fmt"
	"testing"

	"github.com/raftmq/raftmq/mmap"
	"github.com/raftmq/raftmq/vfs"
)

// FuzzRecover: a queue directory holding arbitrary bytes (up to three files,
// the first at file index base) opens without panicking; the recovered queue
// is a prefix of valid units, everything after it is zero, and it accepts the
// next unit.
func FuzzRecover(f *testing.F) {
	f.Add(encodeUnits(Filler, unitN(1), unitN(2), Unit{}, unitN(4)), uint8(0))
	f.Add(encodeUnits(unitN(0), unitN(1), unitN(2), unitN(3), unitN(4), unitN(5), Unit{1, 2, 3}), uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, base uint8) {
		fs := vfs.NewMem()
		dir := "/cq/T/0"
		if err := fs.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		nfiles := min(3, (len(data)+tfs-1)/tfs)
		start := int64(base%8) * tfs
		if nfiles == 0 {
			start = 0
		}
		for i := 0; i < nfiles; i++ {
			b := make([]byte, tfs)
			copy(b, data[i*tfs:])
			path := fmt.Sprintf("%s/%s", dir, mmap.FileName(start+int64(i)*tfs))
			file, err := fs.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := file.WriteAt(b, 0); err != nil {
				t.Fatal(err)
			}
			file.Close()
		}
		s, err := Open(fs, Config{Dir: "/cq", FileSize: tfs})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		q := s.Get("T", 0)
		if q == nil {
			t.Fatal("queue not loaded")
		}
		var all []byte
		for _, seg := range mustSegments(t, q) {
			all = append(all, seg.File.Bytes()...)
		}
		n := q.MaxOffset()*UnitSize - start
		if n < 0 || n > int64(len(all)) {
			t.Fatalf("max offset %d outside files from %d", q.MaxOffset(), start)
		}
		checkPrefix(t, all[:n], true, q.MaxPhyOffset())
		if !allZero(all[n:]) {
			t.Fatal("bytes after the end not zeroed")
		}
		if q.MinOffset() > q.MaxOffset() || q.MinOffset()*UnitSize < start {
			t.Fatalf("min %d max %d", q.MinOffset(), q.MaxOffset())
		}
		next := Unit{PhyOffset: q.MaxPhyOffset(), Size: 1}
		if err := q.Put(q.MaxOffset(), next); err != nil {
			t.Fatalf("put after recovery: %v", err)
		}
		if u, err := q.Get(q.MaxOffset() - 1); err != nil || u != next {
			t.Fatalf("get after put: %+v %v", u, err)
		}
	})
}
