package store

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/mmap"
	"github.com/raftmq/raftmq/vfs"
)

// Benchmarks of the whole store on the real file system, each beside the
// physical ceiling it is compared with, measured in the same run:
//
//	BenchmarkStoreAppend        vs BenchmarkStoreAppendBaselineMemcpy
//	BenchmarkStoreReadBack      (target ≥ 1 GB/s from page cache)
//
// The recovery benchmarks are in recovery_bench_test.go.
//
// The read-back fixture is built once per process, lazily (a plain
// `go test` builds none), under benchFixtureRoot, which TestMain removes.

const (
	benchTopic      = "bench"
	benchQueues     = 8
	benchBodySize   = 1 << 10
	benchPerEntry   = 64
	benchEntryBytes = benchPerEntry * benchBodySize // 64 KiB of bodies per entry
	benchPoolSize   = 256                           // distinct prebuilt entries
)

// benchRoot holds the lazily created shared fixture directory.
type benchRoot struct {
	once sync.Once
	dir  string
	err  error
}

func (r *benchRoot) get() (string, error) {
	r.once.Do(func() { r.dir, r.err = os.MkdirTemp("", "raftmq-store-bench-") })
	return r.dir, r.err
}

// benchFixtureRoot is test-binary state (benchmarks only): created on first
// use, removed by TestMain.
var benchFixtureRoot benchRoot

func TestMain(m *testing.M) {
	code := m.Run()
	if benchFixtureRoot.dir != "" {
		os.RemoveAll(benchFixtureRoot.dir)
	}
	os.Exit(code)
}

// benchConfig is DefaultConfig on dir with segSize segments, allocator and
// pre-touch on and the background flush out of the way.
func benchConfig(dir string, segSize int64) Config {
	c := DefaultConfig(dir)
	c.CommitLogFileSize = segSize
	c.FlushInterval = time.Hour
	c.CleanInterval = time.Hour
	c.UseAllocator = true
	c.PreTouch = true
	return c
}

// benchEntries builds benchPoolSize entries of benchPerEntry 1 KiB messages
// spread over benchQueues queues, every message with its own KEYS and
// UNIQ_KEY. Bodies share one buffer.
func benchEntries(tb testing.TB) [][]commitlog.Message {
	body := make([]byte, benchBodySize)
	for i := range body {
		body[i] = byte(i * 7)
	}
	pool := make([][]commitlog.Message, benchPoolSize)
	n := 0
	for e := range pool {
		msgs := make([]commitlog.Message, benchPerEntry)
		for i := range msgs {
			props, err := commitlog.EncodeProperties(
				commitlog.Property{Key: commitlog.PropertyKeys, Value: fmt.Sprintf("order-%d", n)},
				commitlog.Property{Key: commitlog.PropertyUniqKey, Value: fmt.Sprintf("U%016X", n)},
			)
			if err != nil {
				tb.Fatal(err)
			}
			msgs[i] = commitlog.Message{Topic: benchTopic, QueueID: int32(n % benchQueues), BornTimestamp: int64(n), Body: body, Properties: props}
			n++
		}
		pool[e] = msgs
	}
	return pool
}

// benchFill appends entries until the commitlog holds at least n bytes.
// It returns the next Raft index and the body bytes written.
func benchFill(tb testing.TB, s *Store, pool [][]commitlog.Message, raftIndex uint64, n int64) (uint64, int64) {
	var results []PutResult
	var bodies int64
	for s.log.WriteOffset() < n {
		var err error
		results, err = s.AppendMessages(header(raftIndex), pool[raftIndex%benchPoolSize], results)
		if err != nil {
			tb.Fatal(err)
		}
		raftIndex++
		bodies += benchEntryBytes
	}
	return raftIndex, bodies
}

// BenchmarkStoreAppend: one op appends one 64-message entry (64 KiB of
// bodies) with consume-queue and index dispatch. Flushing is not measured.
func BenchmarkStoreAppend(b *testing.B) {
	pool := benchEntries(b)
	s := mustOpen(b, vfs.OS(), benchConfig(b.TempDir(), 256<<20))
	defer s.Close()
	// Warm up: create the topic and let the allocator prepare the next segment.
	raftIndex, _ := benchFill(b, s, pool, 1, 1)
	var results []PutResult
	b.SetBytes(benchEntryBytes)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var err error
		results, err = s.AppendMessages(header(raftIndex), pool[raftIndex%benchPoolSize], results)
		if err != nil {
			b.Fatal(err)
		}
		raftIndex++
	}
	b.StopTimer()
}

// BenchmarkStoreAppendBaselineMemcpy: the same 64 KiB per op copied into a
// resident MAP_SHARED region (written before timing), the ceiling of any
// mmap commitlog append. The region is kept small (16 MiB) so it stays under
// the dirty-writeback threshold: pages under writeback would make the timed
// copies wait in page_mkwrite, which is not what "warm" means.
func BenchmarkStoreAppendBaselineMemcpy(b *testing.B) {
	const size = 16 << 20
	f, err := mmap.Open(vfs.OS(), filepath.Join(b.TempDir(), "memcpy"), size, mmap.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	dst := f.Bytes()
	src := make([]byte, benchEntryBytes)
	for i := range src {
		src[i] = byte(i)
	}
	// Fault every page in, write it back (so no writeback is in flight
	// while timing), then dirty it again so the timed copies take no
	// page_mkwrite fault.
	fill := func() {
		for off := 0; off+len(src) <= size; off += len(src) {
			copy(dst[off:], src)
		}
	}
	fill()
	if err := f.Flush(0, size); err != nil {
		b.Fatal(err)
	}
	fill()
	b.SetBytes(benchEntryBytes)
	b.ResetTimer()
	off := 0
	for i := 0; i < b.N; i++ {
		if off+len(src) > size {
			off = 0
		}
		copy(dst[off:], src)
		off += len(src)
	}
	b.StopTimer() // the deferred munmap is not part of the copy
}

// readBackFixture is a closed, cleanly shut down store of about 256 MiB.
type readBackFixture struct {
	once   sync.Once
	dir    string
	bodies int64
	err    error
}

var readBack readBackFixture

func (f *readBackFixture) get(b *testing.B) (string, int64) {
	f.once.Do(func() {
		root, err := benchFixtureRoot.get()
		if err != nil {
			f.err = err
			return
		}
		f.dir = filepath.Join(root, "readback")
		s, err := Open(vfs.OS(), benchConfig(f.dir, 256<<20))
		if err != nil {
			f.err = err
			return
		}
		_, f.bodies = benchFill(b, s, benchEntries(b), 1, 256<<20)
		f.err = s.Close()
	})
	if f.err != nil {
		b.Fatal(f.err)
	}
	return f.dir, f.bodies
}

// BenchmarkStoreReadBack: one op reads every queue from offset 0 to its end
// through GetMessages (1024 per call), all from page cache.
func BenchmarkStoreReadBack(b *testing.B) {
	dir, bodies := readBack.get(b)
	s := mustOpen(b, vfs.OS(), benchConfig(dir, 256<<20))
	defer s.Close()
	readAllQueues(b, s) // warm the page cache
	b.SetBytes(bodies)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if got := readAllQueues(b, s); got != bodies {
			b.Fatalf("read %d body bytes, want %d", got, bodies)
		}
	}
	b.StopTimer()
}

func readAllQueues(b *testing.B, s *Store) int64 {
	var total int64
	for q := int32(0); q < benchQueues; q++ {
		for off := int64(0); ; {
			res, err := s.GetMessages(benchTopic, q, off, 1024, 0, "")
			if err != nil {
				b.Fatal(err)
			}
			if res.Status != Found {
				break
			}
			for i := range res.Messages {
				total += int64(len(res.Messages[i].Body))
			}
			off = res.NextOffset
		}
	}
	return total
}
