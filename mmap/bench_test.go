package mmap

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/raftmq/raftmq/vfs"
)

const benchFileSize = 64 << 20

// BenchmarkRoll measures the latency of Queue.Roll with 64 MiB files, with
// and without the allocator. Between rolls (untimed) the benchmark waits for
// the allocator to finish, standing in for the time the writer spends
// filling a segment, and deletes old files to bound disk use.
func BenchmarkRoll(b *testing.B) {
	for _, mode := range []struct {
		name     string
		alloc    bool
		preTouch bool
	}{{"alloc=off", false, false}, {"alloc=on", true, false}, {"alloc=on/pretouch", true, true}} {
		b.Run(mode.name, func(b *testing.B) {
			var a *Allocator
			if mode.alloc {
				a = NewAllocator(vfs.OS(), AllocatorOptions{PreTouch: mode.preTouch})
				defer a.Close()
			}
			q, err := OpenQueue(vfs.OS(), QueueConfig{Dir: b.TempDir(), FileSize: benchFileSize, Allocator: a})
			if err != nil {
				b.Fatal(err)
			}
			defer q.Close()
			// The first roll has nothing prepared; measure the steady state.
			if _, err := q.Roll(); err != nil {
				b.Fatal(err)
			}
			if a != nil {
				a.waitIdle()
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				if _, err := q.Roll(); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
				b.StopTimer()
				if a != nil {
					a.waitIdle()
				}
				if _, err := q.DeleteOldest(1, func(Segment) bool { return false }); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			reportPercentiles(b, lat, "roll")
		})
	}
}

func reportPercentiles(b *testing.B, lat []time.Duration, what string) {
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Nanoseconds()) }
	b.ReportMetric(pct(0.50), "p50-ns/"+what)
	b.ReportMetric(pct(0.99), "p99-ns/"+what)
	b.ReportMetric(float64(lat[len(lat)-1].Nanoseconds()), "max-ns/"+what)
}

// BenchmarkFirstWrite copies 1 MiB chunks into a mapped 64 MiB file that
// is fresh (fallocated, never touched), pre-touched (one write per page
// ahead of time, as the allocator does with PreTouch) or warm (already
// written once). A new file is prepared, untimed, whenever one fills.
func BenchmarkFirstWrite(b *testing.B) {
	for _, mode := range []string{"fresh", "pretouched", "warm"} {
		b.Run(mode, func(b *testing.B) {
			dir := b.TempDir()
			chunk := make([]byte, 1<<20)
			for i := range chunk {
				chunk[i] = byte(i)
			}
			var f File
			n := 0
			next := func() {
				if f != nil && mode == "warm" {
					return
				}
				if f != nil {
					f.Close()
					os.Remove(f.Name())
				}
				var err error
				f, err = Open(vfs.OS(), filepath.Join(dir, FileName(int64(n)*benchFileSize)), benchFileSize, Options{PreTouch: mode == "pretouched"})
				if err != nil {
					b.Fatal(err)
				}
				n++
				if mode == "warm" {
					for off := 0; off < benchFileSize; off += len(chunk) {
						copy(f.Bytes()[off:], chunk)
					}
				}
			}
			next()
			defer func() { f.Close() }()
			b.SetBytes(int64(len(chunk)))
			b.ResetTimer()
			off := 0
			for i := 0; i < b.N; i++ {
				if off == benchFileSize {
					b.StopTimer()
					next()
					off = 0
					b.StartTimer()
				}
				copy(f.Bytes()[off:], chunk)
				off += len(chunk)
			}
		})
	}
}
