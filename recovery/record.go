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

// recordKeys finds TAGS, KEYS and UNIQ_KEY in one pass over the properties
// (name 0x01 value 0x02, repeated); like message.GetProperty, the first
// occurrence of a name wins and a pair without 0x01 is skipped. Properties
// are short, so a byte loop beats a call to bytes.IndexByte per separator.
func recordKeys(props []byte) (tags, keys, uniq []byte) {
	var haveTags, haveKeys, haveUniq bool
	for len(props) > 0 && !(haveTags && haveKeys && haveUniq) {
		i := 0
		for i < len(props) && props[i] != 0x01 && props[i] != 0x02 {
			i++
		}
		if i == len(props) || props[i] == 0x02 { // no name/value separator
			props = props[min(i+1, len(props)):]
			continue
		}
		name := props[:i]
		j := i + 1
		for j < len(props) && props[j] != 0x02 {
			j++
		}
		value := props[i+1 : j]
		props = props[min(j+1, len(props)):]
		switch {
		case !haveKeys && string(name) == message.PropertyKeys:
			keys, haveKeys = value, true
		case !haveUniq && string(name) == message.PropertyUniqKey:
			uniq, haveUniq = value, true
		case !haveTags && string(name) == message.PropertyTags:
			tags, haveTags = value, true
		}
	}
	return tags, keys, uniq
}
