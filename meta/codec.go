package meta

import "encoding/binary"

// Fields: str = u16 length + bytes; counts u32; integers big-endian.

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// appendTopic: name str, queues u32, perm u32.
func appendTopic(b []byte, t TopicConfig) []byte {
	b = appendString(b, t.Name)
	b = binary.BigEndian.AppendUint32(b, uint32(t.Queues))
	return binary.BigEndian.AppendUint32(b, uint32(t.Perm))
}

// appendQueueKey: topic str, queue u32.
func appendQueueKey(b []byte, k QueueKey) []byte {
	b = appendString(b, k.Topic)
	return binary.BigEndian.AppendUint32(b, uint32(k.Queue))
}

// decoder reads fields; after the first error every read returns a zero
// value, so callers check err once.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) take(n int) []byte {
	if d.err != nil || n > len(d.b) {
		d.err = ErrMalformed
		d.b = nil
		return make([]byte, 8)
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u8() byte    { return d.take(1)[0] }
func (d *decoder) u32() uint32 { return binary.BigEndian.Uint32(d.take(4)) }
func (d *decoder) u64() uint64 { return binary.BigEndian.Uint64(d.take(8)) }
func (d *decoder) str() string { return string(d.take(int(binary.BigEndian.Uint16(d.take(2))))) }

func (d *decoder) topic() TopicConfig {
	return TopicConfig{Name: d.str(), Queues: int32(d.u32()), Perm: int32(d.u32())}
}

func (d *decoder) queueKey() QueueKey {
	return QueueKey{Topic: d.str(), Queue: int32(d.u32())}
}

func (d *decoder) offsetKey() OffsetKey {
	return OffsetKey{Group: d.str(), QueueKey: d.queueKey()}
}

// commits reads a count and that many commits (group, topic, queue, offset).
func (d *decoder) commits() []OffsetCommit {
	var out []OffsetCommit
	for n := d.count(); n > 0 && d.err == nil; n-- {
		k := d.offsetKey()
		out = append(out, OffsetCommit{Group: k.Group, Topic: k.Topic, QueueID: k.Queue, Offset: int64(d.u64())})
	}
	return out
}

// count reads a length and bounds it by the bytes left, so a corrupt count
// cannot make a decoder loop for long.
func (d *decoder) count() int {
	n := int(d.u32())
	if n > len(d.b) {
		d.err = ErrMalformed
		return 0
	}
	return n
}
