package store

import (
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/mmap"
	"github.com/raftmq/raftmq/vfs"
)

// Benchmarks of the whole store on the real file system, each beside the
// physical ceiling it is compared with, measured in the same run:
//
//	BenchmarkStoreAppend        vs BenchmarkStoreAppendBaselineMemcpy
//	BenchmarkStoreReadBack      vs BenchmarkStoreReadBackBaseline
//	BenchmarkStoreReadBackView  (zero-copy ReadMessages)
//	                            (target ≥ 1 GB/s from page cache)
//
// Besides wall-clock MB/s, the append and read benchmarks report MB per
// second of CPU time (getrusage): cpu-MB/s over the whole process (the
// allocator's pre-touch and the GC included) and, for the goroutine doing
// the work (locked to its thread), thread-cpu-MB/s. On a shared machine the
// wall-clock figure mostly measures the other tenants; the CPU-time figures
// are what the code costs.
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
func benchEntries(tb testing.TB) [][]message.Message {
	body := make([]byte, benchBodySize)
	for i := range body {
		body[i] = byte(i * 7)
	}
	pool := make([][]message.Message, benchPoolSize)
	n := 0
	for e := range pool {
		msgs := make([]message.Message, benchPerEntry)
		for i := range msgs {
			props, err := message.EncodeProperties(
				message.Property{Key: message.PropertyKeys, Value: fmt.Sprintf("order-%d", n)},
				message.Property{Key: message.PropertyUniqKey, Value: fmt.Sprintf("U%016X", n)},
			)
			if err != nil {
				tb.Fatal(err)
			}
			msgs[i] = message.Message{Topic: benchTopic, QueueID: int32(n % benchQueues), BornTimestamp: int64(n), Body: body, Properties: props}
			n++
		}
		pool[e] = msgs
	}
	return pool
}

// benchFill appends entries until the commitlog holds at least n bytes.
// It returns the next Raft index and the body bytes written.
func benchFill(tb testing.TB, s *Store, pool [][]message.Message, raftIndex uint64, n int64) (uint64, int64) {
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
	cpu := startCPUMeter()
	defer cpu.stop()
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
	cpu.report(b, int64(b.N)*benchEntryBytes)
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
	cpu := startCPUMeter()
	defer cpu.stop()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if got := readAllQueues(b, s); got != bodies {
			b.Fatalf("read %d body bytes, want %d", got, bodies)
		}
	}
	b.StopTimer()
	cpu.report(b, int64(b.N)*bodies)
	b.ReportMetric(float64(b.N)*float64(bodies/benchBodySize)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkStoreReadBackView is BenchmarkStoreReadBack through
// ReadMessages: the same checks, but each record is handed over as a view
// into the mapping and copied into one reused buffer (what a server
// serialising straight into its send buffer does) instead of into a fresh
// allocation per call.
func BenchmarkStoreReadBackView(b *testing.B) {
	dir, bodies := readBack.get(b)
	s := mustOpen(b, vfs.OS(), benchConfig(dir, 256<<20))
	defer s.Close()
	out := make([]byte, 0, 4<<20)
	readAll := func() int64 {
		var total int64
		for q := int32(0); q < benchQueues; q++ {
			for off := int64(0); ; {
				out = out[:0]
				res, err := s.ReadMessages(benchTopic, q, off, 1024, 0, "", func(r *message.Record) error {
					out = append(out, r.Body...)
					out = append(out, r.Properties...)
					total += int64(len(r.Body))
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				if res.Status != Found {
					break
				}
				off = res.NextOffset
			}
		}
		return total
	}
	readAll() // warm the page cache
	b.SetBytes(bodies)
	b.ReportAllocs()
	cpu := startCPUMeter()
	defer cpu.stop()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if got := readAll(); got != bodies {
			b.Fatalf("read %d body bytes, want %d", got, bodies)
		}
	}
	b.StopTimer()
	cpu.report(b, int64(b.N)*bodies)
}

// BenchmarkStoreReadBackBaseline is the ceiling of a verifying reader over
// the same fixture: every mapped commitlog byte of the read-back store is
// CRC32-IEEE'd and copied out once, in order (one pass of the work every
// read does at least: touch the bytes, check the body CRC, copy the body),
// with none of the consume-queue walk or decoding. MB/s counts body bytes,
// as BenchmarkStoreReadBack does.
func BenchmarkStoreReadBackBaseline(b *testing.B) {
	dir, bodies := readBack.get(b)
	s := mustOpen(b, vfs.OS(), benchConfig(dir, 256<<20))
	defer s.Close()
	end := s.log.WriteOffset()
	var views [][]byte
	for _, seg := range s.log.Segments() {
		n := min(seg.End(), end) - seg.Start
		if n > 0 {
			views = append(views, seg.File.Bytes()[:n])
		}
	}
	out := make([]byte, 1<<20)
	pass := func() uint32 {
		var crc uint32
		for _, v := range views {
			for p := 0; p < len(v); p += len(out) {
				chunk := v[p:min(p+len(out), len(v))]
				crc = crc32.Update(crc, crc32.IEEETable, chunk)
				copy(out, chunk)
			}
		}
		return crc
	}
	pass() // warm the page cache and the page tables
	b.SetBytes(bodies)
	cpu := startCPUMeter()
	defer cpu.stop()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if pass() == 0 {
			b.Fatal("crc of the commitlog is 0")
		}
	}
	b.StopTimer()
	cpu.report(b, int64(b.N)*bodies)
}

// cpuMeter measures the CPU time of the process and of the calling
// goroutine's thread (the goroutine is locked to it until stop).
type cpuMeter struct{ proc, thread time.Duration }

func startCPUMeter() *cpuMeter {
	runtime.LockOSThread()
	return &cpuMeter{proc: rusage(syscall.RUSAGE_SELF), thread: rusage(syscall.RUSAGE_THREAD)}
}

func (c *cpuMeter) stop() { runtime.UnlockOSThread() }

// report adds cpu-MB/s and thread-cpu-MB/s for n bytes since start.
func (c *cpuMeter) report(b *testing.B, n int64) {
	proc := rusage(syscall.RUSAGE_SELF) - c.proc
	thread := rusage(syscall.RUSAGE_THREAD) - c.thread
	if proc > 0 {
		b.ReportMetric(float64(n)/1e6/proc.Seconds(), "cpu-MB/s")
	}
	if thread > 0 {
		b.ReportMetric(float64(n)/1e6/thread.Seconds(), "thread-cpu-MB/s")
	}
}

func rusage(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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
