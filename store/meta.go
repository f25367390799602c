package store

import (
	"encoding/binary"
	"fmt"
	"sort"
)

// meta is the state the FSM derives besides the files: topics, consumer
// offsets and the queue table (next queue offset per queue). It is saved in
// the checkpoint and in snapshots; between checkpoints it is rebuilt from the
// command frames and message records of the commitlog.
type meta struct {
	topics  map[string]TopicConfig
	offsets map[offsetKey]int64
	queues  map[queueKey]int64
}

type queueKey struct {
	topic string
	queue int32
}

type offsetKey struct {
	group string
	queueKey
}

func newMeta() *meta {
	return &meta{topics: map[string]TopicConfig{}, offsets: map[offsetKey]int64{}, queues: map[queueKey]int64{}}
}

// metaVersion prefixes the meta encoding.
const metaVersion = 1

// encode is deterministic: maps are written in sorted order, so replicas with
// the same state produce the same bytes.
func (m *meta) encode() []byte {
	var b []byte
	b = append(b, metaVersion)
	names := make([]string, 0, len(m.topics))
	for n := range m.topics {
		names = append(names, n)
	}
	sort.Strings(names)
	b = binary.BigEndian.AppendUint32(b, uint32(len(names)))
	for _, n := range names {
		t := m.topics[n]
		b = appendString(b, t.Name)
		b = binary.BigEndian.AppendUint32(b, uint32(t.Queues))
		b = binary.BigEndian.AppendUint32(b, uint32(t.Perm))
	}
	qks := make([]queueKey, 0, len(m.queues))
	for k := range m.queues {
		qks = append(qks, k)
	}
	sort.Slice(qks, func(i, j int) bool { return lessQueue(qks[i], qks[j]) })
	b = binary.BigEndian.AppendUint32(b, uint32(len(qks)))
	for _, k := range qks {
		b = appendString(b, k.topic)
		b = binary.BigEndian.AppendUint32(b, uint32(k.queue))
		b = binary.BigEndian.AppendUint64(b, uint64(m.queues[k]))
	}
	oks := make([]offsetKey, 0, len(m.offsets))
	for k := range m.offsets {
		oks = append(oks, k)
	}
	sort.Slice(oks, func(i, j int) bool {
		if oks[i].group != oks[j].group {
			return oks[i].group < oks[j].group
		}
		return lessQueue(oks[i].queueKey, oks[j].queueKey)
	})
	b = binary.BigEndian.AppendUint32(b, uint32(len(oks)))
	for _, k := range oks {
		b = appendString(b, k.group)
		b = appendString(b, k.topic)
		b = binary.BigEndian.AppendUint32(b, uint32(k.queue))
		b = binary.BigEndian.AppendUint64(b, uint64(m.offsets[k]))
	}
	return b
}

func lessQueue(a, b queueKey) bool {
	if a.topic != b.topic {
		return a.topic < b.topic
	}
	return a.queue < b.queue
}

func decodeMeta(b []byte) (*meta, error) {
	m := newMeta()
	if len(b) == 0 {
		return m, nil
	}
	d := decoder{b: b}
	if v := d.u8(); v != metaVersion {
		return nil, fmt.Errorf("%w: meta version %d", ErrBadCommand, v)
	}
	for n := d.count(); n > 0 && d.err == nil; n-- {
		t := TopicConfig{Name: d.str(), Queues: int32(d.u32()), Perm: int32(d.u32())}
		m.topics[t.Name] = t
	}
	for n := d.count(); n > 0 && d.err == nil; n-- {
		k := queueKey{topic: d.str(), queue: int32(d.u32())}
		m.queues[k] = int64(d.u64())
	}
	for n := d.count(); n > 0 && d.err == nil; n-- {
		k := offsetKey{group: d.str(), queueKey: queueKey{topic: d.str(), queue: int32(d.u32())}}
		m.offsets[k] = int64(d.u64())
	}
	if d.err != nil || len(d.b) != 0 {
		return nil, fmt.Errorf("%w: meta encoding", ErrBadCommand)
	}
	return m, nil
}

// Command frames: the payload of a commitlog frame of kind KindCommand.
const (
	cmdCreateTopic   byte = 1
	cmdDeleteTopic   byte = 2
	cmdCommitOffsets byte = 3
)

func encodeCreateTopic(t TopicConfig) []byte { return encodeTopicFrame(cmdCreateTopic, t) }

// encodeTopicFrame is the layout create and update share: cmd, name,
// queues (u32), perm (u32).
func encodeTopicFrame(cmd byte, t TopicConfig) []byte {
	b := appendString([]byte{cmd}, t.Name)
	b = binary.BigEndian.AppendUint32(b, uint32(t.Queues))
	return binary.BigEndian.AppendUint32(b, uint32(t.Perm))
}

func encodeDeleteTopic(name string) []byte {
	return appendString([]byte{cmdDeleteTopic}, name)
}

func encodeCommitOffsets(commits []OffsetCommit) []byte {
	b := []byte{cmdCommitOffsets}
	b = binary.BigEndian.AppendUint32(b, uint32(len(commits)))
	for _, c := range commits {
		b = appendString(b, c.Group)
		b = appendString(b, c.Topic)
		b = binary.BigEndian.AppendUint32(b, uint32(c.QueueID))
		b = binary.BigEndian.AppendUint64(b, uint64(c.Offset))
	}
	return b
}

// applyCommand replays a command frame onto m (recovery, and the live path).
func (m *meta) applyCommand(payload []byte) error {
	if len(payload) == 0 {
		return fmt.Errorf("%w: empty", ErrBadCommand)
	}
	d := decoder{b: payload[1:]}
	switch payload[0] {
	case cmdCreateTopic:
		t := TopicConfig{Name: d.str(), Queues: int32(d.u32()), Perm: int32(d.u32())}
		if d.err == nil {
			m.topics[t.Name] = t
		}
	case cmdUpdateTopic:
		name, queues, perm := d.str(), int32(d.u32()), int32(d.u32())
		if d.err == nil {
			m.updateTopic(name, queues, perm)
		}
	case cmdDeleteTopic:
		name := d.str()
		if d.err == nil {
			m.deleteTopic(name)
		}
	case cmdCommitOffsets:
		for n := d.count(); n > 0 && d.err == nil; n-- {
			k := offsetKey{group: d.str(), queueKey: queueKey{topic: d.str(), queue: int32(d.u32())}}
			off := int64(d.u64())
			if d.err == nil {
				m.offsets[k] = off
			}
		}
	default:
		return fmt.Errorf("%w: command type %d", ErrBadCommand, payload[0])
	}
	if d.err != nil || len(d.b) != 0 {
		return fmt.Errorf("%w: command type %d", ErrBadCommand, payload[0])
	}
	return nil
}

func (m *meta) deleteTopic(name string) {
	delete(m.topics, name)
	for k := range m.queues {
		if k.topic == name {
			delete(m.queues, k)
		}
	}
	for k := range m.offsets {
		if k.topic == name {
			delete(m.offsets, k)
		}
	}
}

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) take(n int) []byte {
	if d.err != nil || n > len(d.b) {
		d.err = ErrBadCommand
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

// count reads a length and bounds it by the bytes left, so a corrupt count
// cannot make a decoder loop for long.
func (d *decoder) count() int {
	n := int(d.u32())
	if n > len(d.b) {
		d.err = ErrBadCommand
		return 0
	}
	return n
}

// totalQueues is the queue count of all topics together (MaxTotalQueues).
func (m *meta) totalQueues() int {
	n := 0
	for _, t := range m.topics {
		n += int(t.Queues)
	}
	return n
}
