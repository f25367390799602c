package meta

import (
	"encoding/binary"
	"fmt"
)

// Command frame types: the first byte of a command frame. Values are part
// of the commitlog format: never renumber, only add.
const (
	CmdCreateTopic   byte = 1
	CmdDeleteTopic   byte = 2
	CmdCommitOffsets byte = 3
	// CmdUpdateTopic: a zero queues or perm keeps the current value. Replay
	// resolves the zeros against the topic as it is at that point of the
	// log, which is the same on every replica.
	CmdUpdateTopic byte = 4
)

// EncodeCreateTopic is the command frame that creates t.
func EncodeCreateTopic(t TopicConfig) []byte { return appendTopic([]byte{CmdCreateTopic}, t) }

// EncodeUpdateTopic is the command frame that updates t.Name.
func EncodeUpdateTopic(t TopicConfig) []byte { return appendTopic([]byte{CmdUpdateTopic}, t) }

// EncodeDeleteTopic is the command frame that deletes a topic.
func EncodeDeleteTopic(name string) []byte {
	return appendString([]byte{CmdDeleteTopic}, name)
}

// EncodeCommitOffsets is the command frame that stores commits.
func EncodeCommitOffsets(commits []OffsetCommit) []byte {
	b := []byte{CmdCommitOffsets}
	b = binary.BigEndian.AppendUint32(b, uint32(len(commits)))
	for _, c := range commits {
		b = appendString(b, c.Group)
		b = appendQueueKey(b, QueueKey{c.Topic, c.QueueID})
		b = binary.BigEndian.AppendUint64(b, uint64(c.Offset))
	}
	return b
}

// DeletedTopic is the topic a delete frame deletes (ok false for any other
// frame).
func DeletedTopic(frame []byte) (name string, ok bool) {
	if len(frame) == 0 || frame[0] != CmdDeleteTopic {
		return "", false
	}
	d := decoder{b: frame[1:]}
	name = d.str()
	return name, d.err == nil && len(d.b) == 0
}

// Apply applies a command frame to m. A frame that does not decode is
// ErrMalformed and leaves m as it was.
func (m *Meta) Apply(frame []byte) error {
	if len(frame) == 0 {
		return fmt.Errorf("%w: empty command", ErrMalformed)
	}
	d := decoder{b: frame[1:]}
	var apply func()
	switch frame[0] {
	case CmdCreateTopic:
		t := d.topic()
		apply = func() { m.Topics[t.Name] = t }
	case CmdUpdateTopic:
		t := d.topic()
		apply = func() { m.UpdateTopic(t.Name, t.Queues, t.Perm) }
	case CmdDeleteTopic:
		name := d.str()
		apply = func() { m.DeleteTopic(name) }
	case CmdCommitOffsets:
		commits := d.commits()
		apply = func() { m.commit(commits) }
	default:
		return fmt.Errorf("%w: command type %d", ErrMalformed, frame[0])
	}
	if d.err != nil || len(d.b) != 0 {
		return fmt.Errorf("%w: command type %d", ErrMalformed, frame[0])
	}
	apply()
	return nil
}

func (m *Meta) commit(commits []OffsetCommit) {
	for _, c := range commits {
		m.Offsets[OffsetKey{c.Group, QueueKey{c.Topic, c.QueueID}}] = c.Offset
	}
}
