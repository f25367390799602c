package commitlog

import (
	"encoding/binary"

	"github.com/raftmq/raftmq/message"
)

// encodeEntry writes an entry into buf (len(buf) == its size) at absolute
// offset start, CRC32C included, and appends each record's position to out.
func encodeEntry(buf []byte, start int64, h *EntryHeader, command []byte, msgs []message.Message, queueOffsets []int64, out []RecordPos) []RecordPos {
	fh := message.FrameHeader{
		Size: int32(message.FrameSize + len(command)), Kind: h.Kind, EntrySize: int32(len(buf)),
		RaftIndex: h.RaftIndex, Term: h.Term, StoreTimestamp: h.StoreTimestamp, Count: int32(len(msgs)),
	}
	_ = message.EncodeFrame(buf, fh)
	p := message.FrameSize + copy(buf[message.FrameSize:], command)
	if cap(out)-len(out) < len(msgs) {
		grown := make([]RecordPos, len(out), len(out)+len(msgs))
		copy(grown, out)
		out = grown
	}
	f := message.StoreFields{StoreTimestamp: h.StoreTimestamp, StoreHost: h.StoreHost}
	for i := range msgs {
		m := &msgs[i]
		n := message.MessageSize(m)
		f.QueueOffset, f.PhysicalOffset = queueOffsets[i], start+int64(p)
		message.PutRecord(buf[p:p+n:p+n], m, f)
		out = append(out, RecordPos{Offset: f.PhysicalOffset, Size: int32(n)})
		p += n
	}
	// One pass over the whole entry (still in cache) is faster than one
	// per record: the long-input CRC32C path has fewer merge steps.
	be.PutUint32(buf[message.FrameOffCRC:], message.EntryCRC(buf))
	return out
}

// be is the byte order of every stored field (Java's ByteBuffer order).
var be = binary.BigEndian
