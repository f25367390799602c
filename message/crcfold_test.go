package message

import (
	"hash/crc32"
	"math/rand"
	"testing"

	"github.com/raftmq/raftmq/internal/testseed"
)

// TestFoldCRCMatchesStdlib: updateCastagnoli and checksumIEEE equal the
// standard library on every length around the folding path's thresholds and
// alignments, with a running CRC carried in.
func TestFoldCRCMatchesStdlib(t *testing.T) {
	t.Logf("folding path available: %v", hasFold)
	rng := rand.New(rand.NewSource(testseed.Seed(t)))
	buf := make([]byte, 9000)
	rng.Read(buf)
	for n := 0; n <= 3000; n++ {
		for _, off := range []int{0, 1, 7} {
			p := buf[off : off+n]
			seed := rng.Uint32()
			if got, want := updateCastagnoli(seed, p), crc32.Update(seed, castagnoli, p); got != want {
				t.Fatalf("castagnoli len %d off %d: %#x, want %#x", n, off, got, want)
			}
			if got, want := checksumIEEE(p), crc32.ChecksumIEEE(p); got != want {
				t.Fatalf("ieee len %d off %d: %#x, want %#x", n, off, got, want)
			}
		}
	}
	for _, n := range []int{4096, 65536 + 48, 8999} {
		p := buf[:min(n, len(buf))]
		if got, want := updateCastagnoli(0, p), crc32.Update(0, castagnoli, p); got != want {
			t.Fatalf("castagnoli len %d: %#x, want %#x", len(p), got, want)
		}
	}
}

func benchCRC(b *testing.B, n, chunk int, f func([]byte) uint32) {
	buf := make([]byte, n)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	b.SetBytes(int64(n))
	var sink uint32
	for i := 0; i < b.N; i++ {
		for p := 0; p < n; p += chunk {
			sink += f(buf[p:min(p+chunk, n)])
		}
	}
	_ = sink
}

// BenchmarkCRC compares the folding CRCs with the standard library on what
// an append does: CRC-32 IEEE over 1 KiB bodies, CRC32C over a 64 KiB entry.
func BenchmarkCRC(b *testing.B) {
	b.Run("ieee-1KiB/fold", func(b *testing.B) { benchCRC(b, 64<<10, 1<<10, checksumIEEE) })
	b.Run("ieee-1KiB/stdlib", func(b *testing.B) { benchCRC(b, 64<<10, 1<<10, crc32.ChecksumIEEE) })
	b.Run("crc32c-64KiB/fold", func(b *testing.B) {
		benchCRC(b, 64<<10, 64<<10, func(p []byte) uint32 { return updateCastagnoli(0, p) })
	})
	b.Run("crc32c-64KiB/stdlib", func(b *testing.B) {
		benchCRC(b, 64<<10, 64<<10, func(p []byte) uint32 { return crc32.Update(0, castagnoli, p) })
	})
}
