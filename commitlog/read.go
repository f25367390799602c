package commitlog

import (
	"fmt"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/mmap"
)

// RecordRef is what a reader knows about a record before reading it: where
// it is and what the consume-queue unit pointing at it says it is.
type RecordRef struct {
	Offset      int64 // physical offset (the unit's commitlog offset)
	Size        int32 // TOTALSIZE (the unit's size)
	Topic       string
	QueueID     int32
	QueueOffset int64
}

// ReadRecord decodes and checks the message record at phy: DecodeRecord
// (magic, TOTALSIZE bounds, every length against TOTALSIZE, body CRC) and
// PHYSICALOFFSET equal to phy, and the CRC32C of the entry holding it,
// once per entry and process (entries this process appended are trusted;
// see verified). The record aliases the mapping. A frame or a
// blank at phy gives ErrNotRecord, a write offset or segment below phy
// ErrOutOfRange; anything that does not check is a *CorruptionError naming
// the segment file and offset.
func (l *Log) ReadRecord(phy int64) (message.Record, error) {
	b, seg, err := l.view(phy)
	if err != nil {
		return message.Record{}, err
	}
	if m := peekMagic(b); m == message.MagicFrame || m == message.MagicBlank {
		return message.Record{}, fmt.Errorf("%w: %d holds magic %#08x", ErrNotRecord, phy, m)
	}
	r, err := message.DecodeRecord(b)
	if err != nil {
		return r, readCorruption(seg, phy, "record does not decode", err)
	}
	if r.PhysicalOffset != phy {
		return r, readCorruption(seg, phy, fmt.Sprintf("PHYSICALOFFSET is %d", r.PhysicalOffset), message.ErrBadPosition)
	}
	if err := l.verifyEntryOf(seg, phy, phy+int64(r.Size)); err != nil {
		return message.Record{}, err
	}
	return r, nil
}

// ReadRecordRef reads the record ref points at with ReadRecord's checks
// plus the ones the reference allows: TOTALSIZE equal to ref.Size (and the
// record within the written bytes of its segment), QUEUEID, QUEUEOFFSET and
// TOPIC equal to ref's. A frame or blank at the offset is corruption here
// (consume queues never point at them). Every failure except ErrOutOfRange
// is a *CorruptionError (errors.Is(err, ErrCorrupt)).
//
// The entry's CRC32C covers the fields no other check does (FLAG, SYSFLAG,
// BORNTIMESTAMP, BORNHOST, STORETIMESTAMP, STOREHOST, RECONSUMETIMES,
// PREPAREDTXOFFSET, the bytes of PROPERTIES).
func (l *Log) ReadRecordRef(ref RecordRef) (message.Record, error) {
	b, seg, err := l.view(ref.Offset)
	if err != nil {
		return message.Record{}, err
	}
	phy := ref.Offset
	if ref.Size < message.RecordFixedSize || int(ref.Size) > len(b) {
		return message.Record{}, readCorruption(seg, phy, fmt.Sprintf("unit size %d, %d bytes readable", ref.Size, len(b)), message.ErrBadSize)
	}
	b = b[:ref.Size]
	if err := l.verifyEntryOf(seg, phy, phy+int64(ref.Size)); err != nil {
		return message.Record{}, err
	}
	if m := peekMagic(b); m != message.MagicMessageV1 {
		return message.Record{}, readCorruption(seg, phy, fmt.Sprintf("magic %#08x", m), message.ErrBadMagic)
	}
	if size := int32(be.Uint32(b[message.OffTotalSize:])); size != ref.Size {
		return message.Record{}, readCorruption(seg, phy, fmt.Sprintf("TOTALSIZE %d, unit size %d", size, ref.Size), message.ErrBadSize)
	}
	r, err := message.DecodeRecord(b)
	if err != nil {
		return r, readCorruption(seg, phy, "record does not decode", err)
	}
	switch {
	case r.PhysicalOffset != phy:
		return r, readCorruption(seg, phy, fmt.Sprintf("PHYSICALOFFSET is %d", r.PhysicalOffset), message.ErrBadPosition)
	case r.QueueID != ref.QueueID || r.QueueOffset != ref.QueueOffset:
		return r, readCorruption(seg, phy, fmt.Sprintf("QUEUEID %d QUEUEOFFSET %d, unit of queue %d offset %d",
			r.QueueID, r.QueueOffset, ref.QueueID, ref.QueueOffset), message.ErrBadQueue)
	case string(r.Topic) != ref.Topic:
		return r, readCorruption(seg, phy, fmt.Sprintf("TOPIC %q, unit of topic %q", r.Topic, ref.Topic), message.ErrBadQueue)
	}
	return r, nil
}

func peekMagic(b []byte) uint32 {
	if len(b) < message.OffMagic+4 {
		return 0
	}
	return be.Uint32(b[message.OffMagic:])
}

func readCorruption(seg mmap.Segment, off int64, reason string, err error) error {
	return &CorruptionError{File: seg.File.Name(), Offset: off, Reason: reason, Err: err}
}
