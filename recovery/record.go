package recovery

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/raftmq/raftmq/message"
)

// replayRecord is what replay reads of a verified message record.
type replayRecord struct {
	size        int32
	queueID     int32
	queueOffset int64
	topic       []byte
	props       []byte
}

// recordView reads the fields replay needs from a record the scanner has
// verified (structure, position and the entry CRC). It still bounds every
// slice, so a caller passing unverified bytes gets an error, not a panic.
func recordView(b []byte) (replayRecord, error) {
	if len(b) < message.RecordFixedSize {
		return replayRecord{}, io.ErrUnexpectedEOF
	}
	size := int32(be32(b[message.OffTotalSize:]))
	bodyLen := int(int32(be32(b[message.OffBodyLength:])))
	if size < message.RecordFixedSize || int(size) > len(b) || bodyLen < 0 || message.OffBody+bodyLen+3 > int(size) {
		return replayRecord{}, fmt.Errorf("%w: TOTALSIZE %d BODYLENGTH %d", message.ErrCorrupt, size, bodyLen)
	}
	rb := b[:size]
	p := message.OffBody + bodyLen
	topicLen := int(int8(rb[p]))
	if topicLen <= 0 || p+1+topicLen+2 > len(rb) {
		return replayRecord{}, fmt.Errorf("%w: TOPICLENGTH %d", message.ErrCorrupt, topicLen)
	}
	topic := rb[p+1 : p+1+topicLen]
	p += 1 + topicLen + 2
	return replayRecord{
		size:        size,
		queueID:     int32(be32(rb[message.OffQueueID:])),
		queueOffset: int64(be64(rb[message.OffQueueOffset:])),
		topic:       topic,
		props:       rb[p:],
	}, nil
}

func be32(b []byte) uint32 { return binary.BigEndian.Uint32(b) }
func be64(b []byte) uint64 { return binary.BigEndian.Uint64(b) }
