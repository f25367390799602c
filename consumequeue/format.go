package consumequeue

import (
	"encoding/binary"
	"math"
)

// On-disk layout of a consume queue (RocketMQ's ConsumeQueue, byte for byte).
//
// A queue lives in <root>/<topic>/<queueId>/ as equal-size files named by the
// 20-digit, zero-padded byte offset of their first unit (mmap.FileName). Queue
// offset N sits at byte N*UnitSize of the queue, so a file of DefaultFileSize
// holds 300,000 units and names are multiples of 6,000,000.
//
// One unit, 20 bytes, big-endian:
//
//	offset  size  field
//	0       8     commitlog (physical) offset of the message, int64
//	8       4     message size in the commitlog, int32
//	12      8     tagsCode (hash of the TAGS property), int64
//
// A queue whose first unit is at a non-zero offset starts its first file at
// the file boundary below it and fills the earlier slots of that file with
// filler units (0, math.MaxInt32, 0), as RocketMQ's fillPreBlank does.
//
// The end of a queue is the first unit whose size is <= 0 or whose offset is
// negative (an all-zero unit in practice: files are zeroed past the end).
const (
	// UnitSize is the size of one unit in bytes.
	UnitSize = 20
	// UnitsPerFile is the number of units in a default-size file.
	UnitsPerFile = 300_000
	// DefaultFileSize is RocketMQ's mappedFileSizeConsumeQueue.
	DefaultFileSize = UnitsPerFile * UnitSize

	offPhy  = 0
	offSize = 8
	offTags = 12

	// fillerSize is the size field of a filler unit.
	fillerSize = math.MaxInt32
)

// Unit is one consume-queue entry: where a message lies in the commitlog.
type Unit struct {
	PhyOffset int64
	Size      int32
	TagsCode  int64
}

// Filler is the unit RocketMQ writes before the first real unit of a queue
// that does not start at offset 0.
var Filler = Unit{PhyOffset: 0, Size: fillerSize, TagsCode: 0}

// IsFiller reports whether u is the filler unit.
func (u Unit) IsFiller() bool { return u == Filler }

// Valid reports whether u is a unit recovery accepts: a non-negative offset
// and a positive size whose end does not overflow.
func (u Unit) Valid() bool {
	return u.PhyOffset >= 0 && u.Size > 0 && u.PhyOffset <= math.MaxInt64-int64(u.Size)
}

// End is the commitlog offset just after the message.
func (u Unit) End() int64 { return u.PhyOffset + int64(u.Size) }

// Encode writes u into b[:UnitSize]; b must be at least UnitSize long.
func (u Unit) Encode(b []byte) {
	_ = b[UnitSize-1]
	binary.BigEndian.PutUint64(b[offPhy:], uint64(u.PhyOffset))
	binary.BigEndian.PutUint32(b[offSize:], uint32(u.Size))
	binary.BigEndian.PutUint64(b[offTags:], uint64(u.TagsCode))
}

// DecodeUnit reads a unit from the first UnitSize bytes of b. It returns
// ErrShortUnit if b is shorter; it does not judge validity (see Unit.Valid).
func DecodeUnit(b []byte) (Unit, error) {
	if len(b) < UnitSize {
		return Unit{}, ErrShortUnit
	}
	return decodeUnit(b), nil
}

func decodeUnit(b []byte) Unit {
	return Unit{
		PhyOffset: int64(binary.BigEndian.Uint64(b[offPhy:])),
		Size:      int32(binary.BigEndian.Uint32(b[offSize:])),
		TagsCode:  int64(binary.BigEndian.Uint64(b[offTags:])),
	}
}
