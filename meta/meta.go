package meta

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
)

// ErrMalformed is returned (wrapped) for a meta encoding or command frame
// that does not decode.
var ErrMalformed = errors.New("meta: malformed encoding")

// TopicConfig is a topic: its name, queue count and permission bits.
type TopicConfig struct {
	Name   string
	Queues int32
	Perm   int32
}

// OffsetCommit is one consumer-group offset to store.
type OffsetCommit struct {
	Group   string
	Topic   string
	QueueID int32
	Offset  int64
}

// QueueKey names one queue of a topic.
type QueueKey struct {
	Topic string
	Queue int32
}

// OffsetKey names a consumer group's offset in one queue.
type OffsetKey struct {
	Group string
	QueueKey
}

// Meta is the state derived besides the files: topics, consumer offsets,
// the queue table and the producer table. It is not safe for concurrent
// use.
type Meta struct {
	Topics    map[string]TopicConfig
	Offsets   map[OffsetKey]int64
	Queues    map[QueueKey]int64 // next queue offset per queue
	Producers *Producers         // idempotent producers' windows (producers.go)
	Timer     Timer              // delayed delivery's progress (timer.go)
	Members   map[string]string  // Raft server id → client API address
}

// New returns an empty Meta with the default dedup settings.
func New() *Meta {
	return &Meta{Topics: map[string]TopicConfig{}, Offsets: map[OffsetKey]int64{}, Queues: map[QueueKey]int64{},
		Producers: newProducers(DefaultDedupConfig()), Timer: newTimer(), Members: map[string]string{}}
}

// Meta encoding versions: 1 has no producer table and no timer (it decodes
// as an empty table with the default settings and no delivery yet); 2
// appends them; 3 appends the member map (2 decodes with none).
const (
	version1 = 1
	version2 = 2
	version  = 3
)

// Encode returns the encoding of m (deterministic: maps in sorted order).
func (m *Meta) Encode() []byte {
	b := []byte{version}
	b = m.appendTopics(b)
	b = m.appendQueues(b)
	b = m.appendOffsets(b)
	b = m.Producers.appendProducers(b)
	b = m.Timer.append(b)
	return m.appendMembers(b)
}

// appendMembers: count, then (str id, str apiAddr) sorted by id.
func (m *Meta) appendMembers(b []byte) []byte {
	ids := make([]string, 0, len(m.Members))
	for id := range m.Members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	b = binary.BigEndian.AppendUint32(b, uint32(len(ids)))
	for _, id := range ids {
		b = appendString(b, id)
		b = appendString(b, m.Members[id])
	}
	return b
}

func (m *Meta) appendTopics(b []byte) []byte {
	names := make([]string, 0, len(m.Topics))
	for n := range m.Topics {
		names = append(names, n)
	}
	sort.Strings(names)
	b = binary.BigEndian.AppendUint32(b, uint32(len(names)))
	for _, n := range names {
		b = appendTopic(b, m.Topics[n])
	}
	return b
}

func (m *Meta) appendQueues(b []byte) []byte {
	qks := make([]QueueKey, 0, len(m.Queues))
	for k := range m.Queues {
		qks = append(qks, k)
	}
	sort.Slice(qks, func(i, j int) bool { return lessQueue(qks[i], qks[j]) })
	b = binary.BigEndian.AppendUint32(b, uint32(len(qks)))
	for _, k := range qks {
		b = appendQueueKey(b, k)
		b = binary.BigEndian.AppendUint64(b, uint64(m.Queues[k]))
	}
	return b
}

func (m *Meta) appendOffsets(b []byte) []byte {
	oks := make([]OffsetKey, 0, len(m.Offsets))
	for k := range m.Offsets {
		oks = append(oks, k)
	}
	sort.Slice(oks, func(i, j int) bool {
		if oks[i].Group != oks[j].Group {
			return oks[i].Group < oks[j].Group
		}
		return lessQueue(oks[i].QueueKey, oks[j].QueueKey)
	})
	b = binary.BigEndian.AppendUint32(b, uint32(len(oks)))
	for _, k := range oks {
		b = appendString(b, k.Group)
		b = appendQueueKey(b, k.QueueKey)
		b = binary.BigEndian.AppendUint64(b, uint64(m.Offsets[k]))
	}
	return b
}

func lessQueue(a, b QueueKey) bool {
	if a.Topic != b.Topic {
		return a.Topic < b.Topic
	}
	return a.Queue < b.Queue
}

// Decode decodes what Encode wrote; an empty b is an empty Meta.
func Decode(b []byte) (*Meta, error) {
	m := New()
	if len(b) == 0 {
		return m, nil
	}
	d := decoder{b: b}
	v := d.u8()
	if v < version1 || v > version {
		return nil, fmt.Errorf("%w: meta version %d", ErrMalformed, v)
	}
	for n := d.count(); n > 0 && d.err == nil; n-- {
		t := d.topic()
		m.Topics[t.Name] = t
	}
	for n := d.count(); n > 0 && d.err == nil; n-- {
		k := d.queueKey()
		m.Queues[k] = int64(d.u64())
	}
	for n := d.count(); n > 0 && d.err == nil; n-- {
		k := d.offsetKey()
		m.Offsets[k] = int64(d.u64())
	}
	if v >= version2 && d.err == nil {
		m.Producers = d.producers()
		m.Timer = d.timer()
	}
	if v >= version && d.err == nil {
		for n := d.count(); n > 0 && d.err == nil; n-- {
			id := d.str()
			m.Members[id] = d.str()
		}
	}
	if d.err != nil || len(d.b) != 0 {
		return nil, fmt.Errorf("%w: meta", ErrMalformed)
	}
	return m, nil
}

// TotalQueues is the queue count of all topics together.
func (m *Meta) TotalQueues() int {
	n := 0
	for _, t := range m.Topics {
		n += int(t.Queues)
	}
	return n
}

// DeleteTopic drops a topic with its queue table and consumer offsets.
func (m *Meta) DeleteTopic(name string) {
	delete(m.Topics, name)
	for k := range m.Queues {
		if k.Topic == name {
			delete(m.Queues, k)
		}
	}
	for k := range m.Offsets {
		if k.Topic == name {
			delete(m.Offsets, k)
		}
	}
}

// UpdateTopic applies an update: a zero queues or perm keeps the current
// value; a missing topic is left alone (the live path refused such an
// update before writing it).
func (m *Meta) UpdateTopic(name string, queues, perm int32) {
	cur, ok := m.Topics[name]
	if !ok {
		return
	}
	if queues != 0 {
		cur.Queues = queues
	}
	if perm != 0 {
		cur.Perm = perm
	}
	m.Topics[name] = cur
}
