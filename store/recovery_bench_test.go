package store

import (
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/mmap"
	"github.com/raftmq/raftmq/recovery"
	"github.com/raftmq/raftmq/vfs"
)

// Recovery benchmarks on the real file system, each beside the ceiling it
// is compared with, measured in the same run:
//
//	BenchmarkRecoveryAbnormal  vs BenchmarkRecoveryCeiling: worst case, the
//	    whole commitlog verified and redispatched into fresh consume queues
//	    and index (checkpoint at 0).
//	BenchmarkRecoveryPaired: the same two measured alternately inside every
//	    op, reporting their ratio (robust to a machine shared with other
//	    work: both sides see the same load).
//	BenchmarkRecoveryScanPaired: abnormal recovery's verifying scan alone
//	    (the commitlog's segments mapped, every entry framed and its
//	    CRC32C checked by recovery.Plan.ScanTail) against the same ceiling,
//	    alternately inside every op; go run ./bench reports its ratio.
//	BenchmarkRecoveryRestart: restart (normal, and abnormal with a recent
//	    checkpoint) of a small and of a large store: only the tail above the
//	    checkpoint is replayed, so the time must not grow with the store.
//
// Fixtures are built lazily once per process under benchFixtureRoot, which
// TestMain removes. RAFTMQ_BENCH_BIG=1 makes the large fixtures 1 GiB.

// recoveryFixture is a closed store holding size bytes of commitlog in
// 64 MiB segments.
type recoveryFixture struct {
	once sync.Once
	dir  string
	size int64
	err  error
}

var recoveryStore recoveryFixture

const recoverySegSize = 64 << 20

func recoveryBenchSize() int64 {
	if os.Getenv("RAFTMQ_BENCH_BIG") == "1" {
		return 1 << 30
	}
	return 128 << 20
}

func (f *recoveryFixture) get(b *testing.B) (string, int64) {
	f.once.Do(func() {
		root, err := benchFixtureRoot.get()
		if err != nil {
			f.err = err
			return
		}
		f.dir = filepath.Join(root, "recovery")
		s, err := Open(vfs.OS(), benchConfig(f.dir, recoverySegSize))
		if err != nil {
			f.err = err
			return
		}
		benchFill(b, s, benchEntries(b), 1, recoveryBenchSize())
		f.size = s.log.WriteOffset()
		f.err = s.Close()
	})
	if f.err != nil {
		b.Fatal(f.err)
	}
	return f.dir, f.size
}

// resetForAbnormalRecovery makes the next Open do the most work recovery can
// do: abort present, checkpoint at the very start, no consume queues or index,
// so the whole commitlog is verified and redispatched.
func resetForAbnormalRecovery(b *testing.B, dir string) {
	fsys := vfs.OS()
	if err := recovery.CreateAbort(fsys, dir, os.Getpid()); err != nil {
		b.Fatal(err)
	}
	ck := recovery.Checkpoint{ConfirmOffset: 0, LastEntryOffset: -1, MinOffset: 0}
	if err := recovery.WriteCheckpoint(fsys, dir, &ck); err != nil {
		b.Fatal(err)
	}
	for _, d := range []string{consumeQueueDir, indexDir} {
		if err := os.RemoveAll(filepath.Join(dir, d)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRecoveryAbnormal: one op is Open (full verify scan + redispatch
// of consume queues and index, then the first checkpoint) and Close of the
// fixture store. open-ms is the Open alone: the time until the store serves.
func BenchmarkRecoveryAbnormal(b *testing.B) {
	dir, size := recoveryStore.get(b)
	cfg := benchConfig(dir, recoverySegSize)
	var opening time.Duration
	b.SetBytes(size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		resetForAbnormalRecovery(b, dir)
		b.StartTimer()
		opening += openAndClose(b, cfg, size)
	}
	b.StopTimer()
	b.ReportMetric(float64(opening.Milliseconds())/float64(b.N), "open-ms")
}

// openAndClose opens cfg, checks the recovered size and closes; it returns
// how long Open took.
func openAndClose(b *testing.B, cfg Config, size int64) time.Duration {
	started := time.Now()
	s, err := Open(vfs.OS(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	opened := time.Since(started)
	if got := s.log.WriteOffset(); got != size {
		b.Fatalf("recovered to %d, want %d", got, size)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	return opened
}

// BenchmarkRecoveryCeiling: sequential read + CRC32C of the same size
// commitlog bytes, from page cache, with a 4 MiB buffer.
func BenchmarkRecoveryCeiling(b *testing.B) {
	dir, size := recoveryStore.get(b)
	segs := commitLogSegments(b, dir)
	table := crc32.MakeTable(crc32.Castagnoli)
	buf := make([]byte, 4<<20)
	b.SetBytes(size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if got := crcPrefix(b, segs, size, buf, table); got == 0 {
			b.Fatal("crc32c of the commitlog is 0")
		}
	}
}

// BenchmarkRecoveryPaired: every op runs one abnormal recovery (Open+Close,
// as BenchmarkRecoveryAbnormal) and one ceiling pass (as
// BenchmarkRecoveryCeiling) back to back, and reports both rates and
// recovery/ceiling in percent. The target is ≥ 50 %.
func BenchmarkRecoveryPaired(b *testing.B) {
	dir, size := recoveryStore.get(b)
	cfg := benchConfig(dir, recoverySegSize)
	segs := commitLogSegments(b, dir)
	table := crc32.MakeTable(crc32.Castagnoli)
	buf := make([]byte, 4<<20)
	var rec, open, ceil, recCPU, ceilCPU time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		resetForAbnormalRecovery(b, dir)
		b.StartTimer()
		started, cpu := time.Now(), processCPU(b)
		open += openAndClose(b, cfg, size)
		rec += time.Since(started)
		recCPU += processCPU(b) - cpu
		started, cpu = time.Now(), processCPU(b)
		if got := crcPrefix(b, segs, size, buf, table); got == 0 {
			b.Fatal("crc32c of the commitlog is 0")
		}
		ceil += time.Since(started)
		ceilCPU += processCPU(b) - cpu
	}
	b.StopTimer()
	// CPU time (user+sys, all threads) per op is what a loaded machine
	// distorts least: the wall-clock ratio needs two idle cores.
	b.ReportMetric(float64(recCPU.Milliseconds())/float64(b.N), "recovery-cpu-ms")
	b.ReportMetric(float64(ceilCPU.Milliseconds())/float64(b.N), "ceiling-cpu-ms")
	gbps := func(d time.Duration) float64 { return float64(size) * float64(b.N) / d.Seconds() / 1e9 }
	b.ReportMetric(gbps(rec), "recovery-GB/s")
	b.ReportMetric(gbps(open), "open-GB/s")
	b.ReportMetric(gbps(ceil), "ceiling-GB/s")
	b.ReportMetric(100*ceil.Seconds()/rec.Seconds(), "recovery/ceiling-%")
	b.ReportMetric(100*ceil.Seconds()/open.Seconds(), "open/ceiling-%")
}

// BenchmarkRecoveryScanPaired: every op opens the fixture's commitlog (its
// segments mapped, as a restart does), runs recovery's verifying scan over
// all of it with no checkpoint (recovery.Begin + Plan.ScanTail: every
// entry's frame and CRC32C) and closes it; then reads and CRC32Cs the same
// bytes from the files (BenchmarkRecoveryCeiling's pass); then CRC32Cs them
// through fresh mappings of the segments (what any reader of an mmap'd log
// pays per page). It reports the three rates and scan over each ceiling in
// percent. The three alternate, each op starting with the next one, so load
// on a shared machine (or the writeback of an earlier benchmark's files)
// hits each alike.
func BenchmarkRecoveryScanPaired(b *testing.B) {
	dir, size := recoveryStore.get(b)
	segs := commitLogSegments(b, dir)
	table := crc32.MakeTable(crc32.Castagnoli)
	buf := make([]byte, 4<<20)
	var scan, read, mapped time.Duration
	passes := []func(){
		func() { scanCommitLog(b, dir, size) },
		func() {
			if got := crcPrefix(b, segs, size, buf, table); got == 0 {
				b.Fatal("crc32c of the commitlog is 0")
			}
		},
		func() {
			if got := crcMapped(b, segs, size, table); got == 0 {
				b.Fatal("crc32c of the commitlog is 0")
			}
		},
	}
	took := []*time.Duration{&scan, &read, &mapped}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range passes { // op i starts with pass i mod 3: no pass always runs first
			p := (i + k) % len(passes)
			started := time.Now()
			passes[p]()
			*took[p] += time.Since(started)
		}
	}
	b.StopTimer()
	gbps := func(d time.Duration) float64 { return float64(size) * float64(b.N) / d.Seconds() / 1e9 }
	b.ReportMetric(gbps(scan), "scan-GB/s")
	b.ReportMetric(gbps(read), "ceiling-GB/s")
	b.ReportMetric(gbps(mapped), "mapped-GB/s")
	b.ReportMetric(100*read.Seconds()/scan.Seconds(), "scan/ceiling-%")
	b.ReportMetric(100*mapped.Seconds()/scan.Seconds(), "scan/mapped-%")
	b.ReportMetric(float64(size)/1e6, "commitlog-MB")
}

// crcMapped maps each file afresh and CRCs the first n bytes of their
// concatenation through the mappings.
func crcMapped(b *testing.B, files []string, n int64, table *crc32.Table) uint32 {
	var crc uint32
	for _, name := range files {
		if n <= 0 {
			break
		}
		f, err := mmap.Open(vfs.OS(), name, recoverySegSize, mmap.Options{})
		if err != nil {
			b.Fatal(err)
		}
		data := f.Bytes()
		if int64(len(data)) > n {
			data = data[:n]
		}
		crc = crc32.Update(crc, table, data)
		n -= int64(len(data))
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
	return crc
}

// scanCommitLog opens dir's commitlog and runs abnormal recovery's scan from
// its start; the scan must find every one of size bytes intact.
func scanCommitLog(b *testing.B, dir string, size int64) {
	log, err := commitlog.Open(vfs.OS(), commitlog.Config{Dir: filepath.Join(dir, commitLogDir), FileSize: recoverySegSize})
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	plan, err := recovery.Begin(log, nil, true)
	if err != nil {
		b.Fatal(err)
	}
	if err := plan.ScanTail(log, hclog.NewNullLogger(), nil); err != nil {
		b.Fatal(err)
	}
	if plan.ConfirmOffset != size || plan.Tail != recovery.TailClean {
		b.Fatalf("scan confirmed %d bytes (tail %v), want %d, clean", plan.ConfirmOffset, plan.Tail, size)
	}
}

// commitLogSegments lists the commitlog segment files in log order
// (zero-padded offset names sort numerically).
func commitLogSegments(b *testing.B, dir string) []string {
	entries, err := os.ReadDir(filepath.Join(dir, commitLogDir))
	if err != nil {
		b.Fatal(err)
	}
	var segs []string
	for _, e := range entries {
		if _, err := mmap.ParseFileName(e.Name()); err == nil {
			segs = append(segs, filepath.Join(dir, commitLogDir, e.Name()))
		}
	}
	sort.Strings(segs)
	return segs
}

// crcPrefix reads the first n bytes of the concatenated files and CRCs them.
func crcPrefix(b *testing.B, files []string, n int64, buf []byte, table *crc32.Table) uint32 {
	var crc uint32
	for _, name := range files {
		if n <= 0 {
			break
		}
		f, err := os.Open(name)
		if err != nil {
			b.Fatal(err)
		}
		for n > 0 {
			chunk := buf
			if int64(len(chunk)) > n {
				chunk = chunk[:n]
			}
			k, err := io.ReadFull(f, chunk)
			crc = crc32.Update(crc, table, chunk[:k])
			n -= int64(k)
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		f.Close()
	}
	return crc
}

// restartFixture is a store left as a kill -9 leaves it: abort file
// present, a checkpoint restartTail bytes below the end, the tail above it
// in the files (page cache), consume queues and index holding it too.
// ckpt is the checkpoint file as the crash left it; each abnormal-restart
// op puts it back, so every op replays the same tail.
type restartFixture struct {
	once sync.Once
	dir  string
	size int64
	ckpt []byte
	err  error
}

// restartTail is what lies above the checkpoint: 4 MiB of entries, about
// a second of writes at a few MB/s between two flushes.
const restartTail = 4 << 20

var restartSmall, restartLarge restartFixture

func (f *restartFixture) get(b *testing.B, name string, size int64) (string, int64) {
	f.once.Do(func() { f.build(b, name, size) })
	if f.err != nil {
		b.Fatal(f.err)
	}
	return f.dir, f.size
}

func (f *restartFixture) build(b *testing.B, name string, size int64) {
	root, err := benchFixtureRoot.get()
	if err != nil {
		f.err = err
		return
	}
	f.dir = filepath.Join(root, name)
	s, err := Open(vfs.OS(), benchConfig(f.dir, recoverySegSize))
	if err != nil {
		f.err = err
		return
	}
	pool := benchEntries(b)
	next, _ := benchFill(b, s, pool, 1, size-restartTail)
	if f.err = s.Flush(); f.err != nil {
		return
	}
	benchFill(b, s, pool, next, size)
	f.size = s.log.WriteOffset()
	abandon(s) // kill -9: no final flush, the abort file stays
	f.ckpt, f.err = os.ReadFile(filepath.Join(f.dir, recovery.CheckpointName))
}

// abandon stops s as kill -9 would: the service goroutine ends, the files
// are unmapped, nothing is flushed and the abort file stays. What was
// written stays in the page cache, as after a process kill.
func abandon(s *Store) {
	s.closed.Store(true)
	close(s.stop)
	s.wg.Wait()
	s.notify.closeAll()
	_ = s.closeFiles()
}

// BenchmarkRecoveryRestart: one op is Open and Close of a store of
// restartSmallSize and of the bench size, after a clean shutdown (normal)
// and after a kill with a checkpoint restartTail bytes below the end
// (abnormal-tail). open-ms must not grow with the store size: recovery
// verifies and replays only what lies above the checkpoint.
func BenchmarkRecoveryRestart(b *testing.B) {
	const restartSmallSize = 32 << 20
	for _, c := range []struct {
		name string
		fix  *restartFixture
		size int64
	}{
		{"small", &restartSmall, restartSmallSize},
		{"large", &restartLarge, recoveryBenchSize()},
	} {
		dir, size := c.fix.get(b, "restart-"+c.name, c.size)
		cfg := benchConfig(dir, recoverySegSize)
		b.Run("abnormal-tail/"+c.name, func(b *testing.B) {
			var opening time.Duration
			for i := 0; i < b.N; i++ {
				c.fix.crashAgain(b)
				opening += openAndClose(b, cfg, size)
			}
			b.ReportMetric(float64(opening.Microseconds())/1e3/float64(b.N), "open-ms")
			b.ReportMetric(float64(size)/1e6, "store-MB")
		})
		b.Run("normal/"+c.name, func(b *testing.B) {
			var opening time.Duration
			for i := 0; i < b.N; i++ {
				opening += openAndClose(b, cfg, size)
			}
			b.ReportMetric(float64(opening.Microseconds())/1e3/float64(b.N), "open-ms")
			b.ReportMetric(float64(size)/1e6, "store-MB")
		})
	}
}

// crashAgain puts back the state the kill left: the abort file and the
// checkpoint restartTail bytes below the end.
func (f *restartFixture) crashAgain(b *testing.B) {
	if err := recovery.CreateAbort(vfs.OS(), f.dir, os.Getpid()); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.dir, recovery.CheckpointName), f.ckpt, 0o644); err != nil {
		b.Fatal(err)
	}
}

// processCPU is the user+system CPU time of the whole process so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
