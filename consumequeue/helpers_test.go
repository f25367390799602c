package consumequeue

import (
	"github.com/raftmq/raftmq/internal/testseed"
	"testing"

	"github.com/raftmq/raftmq/vfs"
)

// testSeed is the shared seed source (flag -seed, RAFTMQ_SEED, clock).
func testSeed(t testing.TB) int64 { return testseed.Seed(t) }

const testUnitsPerFile = 5

func openTest(t testing.TB, fs vfs.FS, fileSize int64) *Store {
	t.Helper()
	s, err := Open(fs, Config{Dir: "/cq", FileSize: fileSize})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func mustQueue(t testing.TB, s *Store, topic string, id int32) *Queue {
	t.Helper()
	q, err := s.GetOrCreate(topic, id)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// unitN is the test unit at queue offset i (phy i*100, size 50).
func unitN(i int64) Unit { return Unit{PhyOffset: i * 100, Size: 50, TagsCode: i} }

func putN(t testing.TB, q *Queue, from, to int64) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := q.Put(i, unitN(i)); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
}

func checkUnits(t testing.TB, q *Queue, min, max int64) {
	t.Helper()
	if q.MinOffset() != min || q.MaxOffset() != max {
		t.Fatalf("min,max = %d,%d want %d,%d", q.MinOffset(), q.MaxOffset(), min, max)
	}
	for i := min; i < max; i++ {
		u, err := q.Get(i)
		if err != nil || u != unitN(i) {
			t.Fatalf("get %d = %+v, %v", i, u, err)
		}
	}
	if max > min && q.MaxPhyOffset() != unitN(max-1).End() {
		t.Fatalf("maxPhy %d, want %d", q.MaxPhyOffset(), unitN(max-1).End())
	}
}

func readFile(t testing.TB, fs vfs.FS, path string) []byte {
	t.Helper()
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, err := f.Size()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t testing.TB, fs vfs.FS, path string, b []byte) {
	t.Helper()
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}
