package consumequeue

import (
	"math/rand"
	"testing"

	"github.com/raftmq/raftmq/vfs"
)

// BenchmarkPut measures Put into a default-size queue on the OS file system
// (mmap), against a baseline that only encodes units into a byte slice.
func BenchmarkPut(b *testing.B) {
	b.Run("queue", func(b *testing.B) {
		s, err := Open(vfs.OS(), Config{Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		q, err := s.GetOrCreate("bench", 0)
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := q.Put(int64(i), unitN(int64(i))); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "units/s")
	})
	b.Run("baseline-encode", func(b *testing.B) {
		buf := make([]byte, DefaultFileSize)
		for i := 0; i < b.N; i++ {
			unitN(int64(i)).Encode(buf[(i%UnitsPerFile)*UnitSize:])
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "units/s")
	})
}

// BenchmarkRange reads 32 units at random offsets of a full default-size
// file, against a baseline decoding 32 units from a byte slice.
func BenchmarkRange(b *testing.B) {
	const batch = 32
	b.Run("queue", func(b *testing.B) {
		s, err := Open(vfs.OS(), Config{Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		q, err := s.GetOrCreate("bench", 0)
		if err != nil {
			b.Fatal(err)
		}
		putN(b, q, 0, UnitsPerFile)
		r := rand.New(rand.NewSource(1))
		dst := make([]Unit, 0, batch)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			var err error
			if dst, err = q.Range(int64(r.Intn(UnitsPerFile-batch)), batch, dst[:0]); err != nil || len(dst) != batch {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "units/s")
	})
	b.Run("baseline-decode", func(b *testing.B) {
		buf := make([]byte, DefaultFileSize)
		r := rand.New(rand.NewSource(1))
		dst := make([]Unit, 0, batch)
		for i := 0; i < b.N; i++ {
			off := r.Intn(UnitsPerFile - batch)
			dst = dst[:0]
			for j := 0; j < batch; j++ {
				dst = append(dst, decodeUnit(buf[(off+j)*UnitSize:]))
			}
		}
		b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "units/s")
	})
}
