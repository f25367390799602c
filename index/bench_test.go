package index

import (
	"math"
	"math/rand"
	"strconv"
	"testing"
	"time"

	"github.com/raftmq/raftmq/vfs"
)

const benchBase = int64(1_700_000_000_000)

func benchKey(i int) string  { return "order-" + strconv.Itoa(i) }
func benchUniq(i int) string { return "7F0000010001" + strconv.Itoa(i) }

// BenchmarkPutMessage indexes messages with one key and a unique key (two
// entries each) into a default-size file on the OS file system, against a
// baseline that appends the same offsets to a Go map.
func BenchmarkPutMessage(b *testing.B) {
	b.Run("index", func(b *testing.B) {
		s, err := Open(vfs.OS(), Config{Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		keys := make([]string, 1)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			keys[0] = benchKey(i)
			if err := s.PutMessage("bench", keys, benchUniq(i), int64(i)*200, benchBase+int64(i)); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	})
	b.Run("baseline-gomap", func(b *testing.B) {
		m := map[string][]int64{}
		for i := 0; i < b.N; i++ {
			k, u := BuildKey("bench", benchKey(i)), BuildKey("bench", benchUniq(i))
			m[k] = append(m[k], int64(i)*200)
			m[u] = append(m[u], int64(i)*200)
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	})
}

// BenchmarkQuery looks up random keys among 500,000 indexed messages (one
// million entries) in a default-size file; baseline: a Go map lookup.
func BenchmarkQuery(b *testing.B) {
	const n = 500_000
	b.Run("index", func(b *testing.B) {
		s, err := Open(vfs.OS(), Config{Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		for i := 0; i < n; i++ {
			if err := s.PutMessage("bench", []string{benchKey(i)}, benchUniq(i), int64(i)*200, benchBase+int64(i)); err != nil {
				b.Fatal(err)
			}
		}
		r := rand.New(rand.NewSource(1))
		var worst time.Duration
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			k := r.Intn(n)
			start := time.Now()
			got, err := s.Query("bench", benchKey(k), 64, 0, math.MaxInt64)
			if d := time.Since(start); d > worst {
				worst = d
			}
			if err != nil || len(got) == 0 {
				b.Fatalf("query %d: %v %v", k, got, err)
			}
		}
		b.ReportMetric(float64(worst.Microseconds()), "max-µs")
	})
	b.Run("baseline-gomap", func(b *testing.B) {
		m := make(map[string][]int64, n)
		for i := 0; i < n; i++ {
			m[BuildKey("bench", benchKey(i))] = []int64{int64(i) * 200}
		}
		r := rand.New(rand.NewSource(1))
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if len(m[BuildKey("bench", benchKey(r.Intn(n)))]) == 0 {
				b.Fatal("missing")
			}
		}
	})
}
