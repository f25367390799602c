package index

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// On-disk layout of an index file (RocketMQ's IndexFile, byte for byte; all
// integers big-endian).
//
//	offset                       size             content
//	0                            HeaderSize (40)  header
//	40                           slots*SlotSize   hash slots
//	40+slots*4                   indexes*20       entries (entry 0 reserved)
//
// Header:
//
//	0   8  beginTimestamp  store time (ms) of the first entry's message
//	8   8  endTimestamp    store time (ms) of the last entry's message
//	16  8  beginPhyOffset  commitlog offset of the first entry's message
//	24  8  endPhyOffset    commitlog offset of the last entry's message
//	32  4  hashSlotCount   number of slots in use
//	36  4  indexCount      next entry number; starts at 1 (0 = "no entry")
//
// A slot (int32) holds the number of the newest entry whose key hashes to
// it, or 0. An entry:
//
//	0   4  keyHash    abs(Java String.hashCode("topic#key")), MinInt32 -> 0
//	4   8  phyOffset  commitlog offset of the message
//	12  4  timeDiff   (storeTimestamp-beginTimestamp)/1000, clamped to [0, MaxInt32]
//	16  4  prevIndex  previous (older) entry of the same slot, 0 ends the chain
//
// A new file (on roll) starts with begin = end = the previous file's end; the
// first put then sets begin to its own message. A file is full when
// indexCount reaches the configured number of entries. Files are named by a
// store timestamp as yyyyMMddHHmmssSSS in UTC (FileName).
const (
	HeaderSize = 40
	SlotSize   = 4
	EntrySize  = 20

	// DefaultMaxHashSlots is RocketMQ's maxHashSlotNum.
	DefaultMaxHashSlots = 5_000_000
	// DefaultMaxIndexes is RocketMQ's maxIndexNum.
	DefaultMaxIndexes = 20_000_000

	hdrBeginTS   = 0
	hdrEndTS     = 8
	hdrBeginPhy  = 16
	hdrEndPhy    = 24
	hdrSlotCount = 32
	hdrIndexCnt  = 36

	entHash = 0
	entPhy  = 4
	entDiff = 12
	entPrev = 16

	// nameLayout is yyyyMMddHHmmss.SSS; the dot is removed in names.
	nameLayout = "20060102150405.000"
	nameLen    = 17
	// maxNameTS is the last millisecond of year 9999 (names stay 17 digits).
	maxNameTS = 253402300799999
)

// FileSize is the size of an index file with the given slot and entry counts.
func FileSize(slots, indexes int) int64 {
	return HeaderSize + int64(slots)*SlotSize + int64(indexes)*EntrySize
}

// Header is the 40-byte file header.
type Header struct {
	BeginTimestamp int64
	EndTimestamp   int64
	BeginPhyOffset int64
	EndPhyOffset   int64
	HashSlotCount  int32
	IndexCount     int32
}

// Encode writes h into b[:HeaderSize].
func (h Header) Encode(b []byte) {
	_ = b[HeaderSize-1]
	be := binary.BigEndian
	be.PutUint64(b[hdrBeginTS:], uint64(h.BeginTimestamp))
	be.PutUint64(b[hdrEndTS:], uint64(h.EndTimestamp))
	be.PutUint64(b[hdrBeginPhy:], uint64(h.BeginPhyOffset))
	be.PutUint64(b[hdrEndPhy:], uint64(h.EndPhyOffset))
	be.PutUint32(b[hdrSlotCount:], uint32(h.HashSlotCount))
	be.PutUint32(b[hdrIndexCnt:], uint32(h.IndexCount))
}

// DecodeHeader reads a header from b; ErrShort if b is too short.
func DecodeHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, ErrShort
	}
	be := binary.BigEndian
	return Header{
		BeginTimestamp: int64(be.Uint64(b[hdrBeginTS:])),
		EndTimestamp:   int64(be.Uint64(b[hdrEndTS:])),
		BeginPhyOffset: int64(be.Uint64(b[hdrBeginPhy:])),
		EndPhyOffset:   int64(be.Uint64(b[hdrEndPhy:])),
		HashSlotCount:  int32(be.Uint32(b[hdrSlotCount:])),
		IndexCount:     int32(be.Uint32(b[hdrIndexCnt:])),
	}, nil
}

// Entry is one 20-byte index entry.
type Entry struct {
	KeyHash   int32
	PhyOffset int64
	TimeDiff  int32
	PrevIndex int32
}

// Encode writes e into b[:EntrySize].
func (e Entry) Encode(b []byte) {
	_ = b[EntrySize-1]
	be := binary.BigEndian
	be.PutUint32(b[entHash:], uint32(e.KeyHash))
	be.PutUint64(b[entPhy:], uint64(e.PhyOffset))
	be.PutUint32(b[entDiff:], uint32(e.TimeDiff))
	be.PutUint32(b[entPrev:], uint32(e.PrevIndex))
}

// DecodeEntry reads an entry from b; ErrShort if b is too short.
func DecodeEntry(b []byte) (Entry, error) {
	if len(b) < EntrySize {
		return Entry{}, ErrShort
	}
	be := binary.BigEndian
	return Entry{
		KeyHash:   int32(be.Uint32(b[entHash:])),
		PhyOffset: int64(be.Uint64(b[entPhy:])),
		TimeDiff:  int32(be.Uint32(b[entDiff:])),
		PrevIndex: int32(be.Uint32(b[entPrev:])),
	}, nil
}

// JavaHashCode is Java's String.hashCode of s: s[0]*31^(n-1) + ... over the
// UTF-16 code units of s (invalid UTF-8 reads as U+FFFD, as Java decodes it).
func JavaHashCode(s string) int32 {
	var h int32
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 {
			return javaHashCodeSlow(s)
		}
		h = 31*h + int32(c)
	}
	return h
}

func javaHashCodeSlow(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			r1, r2 := utf16.EncodeRune(r)
			h = 31*h + r1
			h = 31*h + r2
			continue
		}
		h = 31*h + r
	}
	return h
}

// javaHashBytes continues Java's String.hashCode h over the UTF-8 bytes b
// (as UTF-16 code units; invalid UTF-8 reads as U+FFFD, as JavaHashCode).
func javaHashBytes(h int32, b []byte) int32 {
	for len(b) > 0 {
		if c := b[0]; c < utf8.RuneSelf {
			h = 31*h + int32(c)
			b = b[1:]
			continue
		}
		r, n := utf8.DecodeRune(b)
		if r >= 0x10000 {
			r1, r2 := utf16.EncodeRune(r)
			h = 31*(31*h+r1) + r2
		} else {
			h = 31*h + r
		}
		b = b[n:]
	}
	return h
}

// KeyHash is the stored hash of an index key ("topic#key"):
// abs(JavaHashCode), with MinInt32 mapped to 0.
func KeyHash(key string) int32 { return absHash(JavaHashCode(key)) }

// absHash is abs(h) with MinInt32 mapped to 0.
func absHash(h int32) int32 {
	if h == math.MinInt32 {
		return 0
	}
	if h < 0 {
		return -h
	}
	return h
}

// slotOf maps a stored hash to its slot; a negative hash (only in a corrupt
// file) is folded into range.
func slotOf(hash int32, slots int) int {
	s := int(hash) % slots
	if s < 0 {
		s += slots
	}
	return s
}

// BuildKey is the key string RocketMQ indexes: topic + "#" + key.
func BuildKey(topic, key string) string { return topic + "#" + key }

// FileName formats a store timestamp (ms since the epoch, UTC) as
// yyyyMMddHHmmssSSS; timestamps are clamped to years 1970..9999.
func FileName(ts int64) string {
	ts = clampNameTS(ts)
	s := time.UnixMilli(ts).UTC().Format(nameLayout)
	return s[:14] + s[15:]
}

func clampNameTS(ts int64) int64 { return min(max(ts, 0), maxNameTS) }

// ParseFileName is the inverse of FileName; it rejects anything else.
func ParseFileName(name string) (int64, error) {
	if len(name) != nameLen {
		return 0, fmt.Errorf("%w: %q", ErrFileName, name)
	}
	t, err := time.ParseInLocation(nameLayout, name[:14]+"."+name[14:], time.UTC)
	if err != nil {
		return 0, fmt.Errorf("%w: %q", ErrFileName, name)
	}
	ts := t.UnixMilli()
	if FileName(ts) != name {
		return 0, fmt.Errorf("%w: %q", ErrFileName, name)
	}
	return ts, nil
}
