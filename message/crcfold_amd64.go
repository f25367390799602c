package message

import (
	"hash/crc32"

	"golang.org/x/sys/cpu"
)

// foldConsts are the folding and Barrett constants of one CRC-32 polynomial
// for foldCRC (bit-reflected, as in Intel's white paper; see crcfold_test.go
// for how they are derived and checked). Layout is fixed by the assembly.
type foldConsts struct {
	k2048 [8]uint64 // x^(2048±32) mod P, splatted over four lanes
	k512  [8]uint64 // x^(512±32) mod P, splatted
	k128  [2]uint64 // x^(128±32) mod P
	k64   uint64    // x^64 mod P
	_     uint64
	poly  [2]uint64 // P' and the Barrett constant u
}

func splat(a, b uint64) [8]uint64 { return [8]uint64{a, b, a, b, a, b, a, b} }

var (
	castagnoliFold = &foldConsts{
		k2048: splat(0x0dcb17aa4, 0x0b9e02b86),
		k512:  splat(0x0740eef02, 0x09e4addf8),
		k128:  [2]uint64{0x0f20c0dfe, 0x14cd00bd6},
		k64:   0x0dd45aab8,
		poly:  [2]uint64{0x105ec76f1, 0x0dea713f1},
	}
	ieeeFold = &foldConsts{
		k2048: splat(0x11542778a, 0x1322d1430),
		k512:  splat(0x154442bd4, 0x1c6e41596),
		k128:  [2]uint64{0x1751997d0, 0x0ccaa009e},
		k64:   0x163cd6124,
		poly:  [2]uint64{0x1db710641, 0x1f7011641},
	}
)

//go:noescape
func foldCRC(crc uint32, p []byte, k *foldConsts) uint32

// hasFold: the CPU and OS support the 512-bit carry-less multiply path.
var hasFold = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VPCLMULQDQ && cpu.X86.HasPCLMULQDQ && cpu.X86.HasSSE41

// foldMin is the shortest input worth the folding path.
const foldMin = 512

func updateFold(crc uint32, p []byte, k *foldConsts, tab *crc32.Table) uint32 {
	if hasFold && len(p) >= foldMin {
		n := len(p) &^ 15
		crc = ^foldCRC(^crc, p[:n], k)
		if n == len(p) {
			return crc
		}
		p = p[n:]
	}
	return crc32.Update(crc, tab, p)
}

// updateCastagnoli is crc32.Update(crc, castagnoli, p), faster on long
// inputs where AVX-512 VPCLMULQDQ is available.
func updateCastagnoli(crc uint32, p []byte) uint32 {
	return updateFold(crc, p, castagnoliFold, castagnoli)
}

// checksumIEEE is crc32.ChecksumIEEE(p), faster on long inputs where
// AVX-512 VPCLMULQDQ is available.
func checksumIEEE(p []byte) uint32 {
	return updateFold(0, p, ieeeFold, crc32.IEEETable)
}
