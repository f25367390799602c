//go:build !amd64

package message

import "hash/crc32"

// hasFold: no folding path on this architecture.
const hasFold = false

func updateCastagnoli(crc uint32, p []byte) uint32 { return crc32.Update(crc, castagnoli, p) }

func checksumIEEE(p []byte) uint32 { return crc32.ChecksumIEEE(p) }
