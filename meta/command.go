package meta

import (
	"encoding/binary"
	"fmt"
)

// CommandType is an admin command. Its value is the type byte of the
// command's commitlog frame; a Raft log entry numbers the same commands
// differently (EntryType). Values are part of both formats: never
// renumber, only add.
type CommandType byte

const (
	CreateTopic   CommandType = 1
	DeleteTopic   CommandType = 2
	CommitOffsets CommandType = 3
	// UpdateTopic: a zero queues or perm keeps the current value. Replay
	// resolves the zeros against the topic as it is at that point of the
	// log, which is the same on every replica.
	UpdateTopic CommandType = 4
	// SetDedup sets the producer table's settings (DedupConfig): the
	// leader proposes it when its configured settings differ from the
	// replicated ones.
	SetDedup CommandType = 5
	// SetMember records the client API address of a Raft server (the
	// FSM's SetMemberMeta entry), so a restarted node knows its peers'
	// addresses without replaying the Raft log.
	SetMember CommandType = 6
)

func (t CommandType) String() string {
	switch t {
	case CreateTopic:
		return "CreateTopic"
	case DeleteTopic:
		return "DeleteTopic"
	case CommitOffsets:
		return "CommitOffsets"
	case UpdateTopic:
		return "UpdateTopic"
	case SetDedup:
		return "SetDedup"
	case SetMember:
		return "SetMember"
	}
	return fmt.Sprintf("CommandType(%d)", byte(t))
}

// Command is one admin command, as a Raft log entry proposes it and as a
// commitlog frame records it.
type Command struct {
	Type CommandType
	// Topic: the topic of CreateTopic and UpdateTopic; of DeleteTopic only
	// the Name.
	Topic TopicConfig
	// Commits of CommitOffsets.
	Commits []OffsetCommit
	// Dedup of SetDedup.
	Dedup DedupConfig
	// MemberID and MemberAPIAddr of SetMember.
	MemberID, MemberAPIAddr string
}

// Frame is the command frame of c: the payload of a commitlog frame of kind
// KindCommand (type byte, then str = u16 length + bytes, counts u32,
// integers big-endian).
func (c *Command) Frame() []byte {
	b := []byte{byte(c.Type)}
	switch c.Type {
	case CreateTopic, UpdateTopic:
		b = appendTopic(b, c.Topic)
	case DeleteTopic:
		b = appendString(b, c.Topic.Name)
	case CommitOffsets:
		b = binary.BigEndian.AppendUint32(b, uint32(len(c.Commits)))
		for _, oc := range c.Commits {
			b = appendString(b, oc.Group)
			b = appendQueueKey(b, QueueKey{oc.Topic, oc.QueueID})
			b = binary.BigEndian.AppendUint64(b, uint64(oc.Offset))
		}
	case SetDedup:
		b = binary.BigEndian.AppendUint32(b, uint32(c.Dedup.Window))
		b = binary.BigEndian.AppendUint64(b, uint64(c.Dedup.Expiry))
	case SetMember:
		b = appendString(b, c.MemberID)
		b = appendString(b, c.MemberAPIAddr)
	}
	return b
}

// DecodeFrame decodes a command frame. It never panics; a frame that does
// not decode exactly is ErrMalformed.
func DecodeFrame(frame []byte) (Command, error) {
	if len(frame) == 0 {
		return Command{}, fmt.Errorf("%w: empty command", ErrMalformed)
	}
	c := Command{Type: CommandType(frame[0])}
	d := decoder{b: frame[1:]}
	switch c.Type {
	case CreateTopic, UpdateTopic:
		c.Topic = d.topic()
	case DeleteTopic:
		c.Topic.Name = d.str()
	case CommitOffsets:
		c.Commits = d.commits()
	case SetDedup:
		c.Dedup = DedupConfig{Window: int(d.u32()), Expiry: int64(d.u64())}
		if d.err == nil && c.Dedup.Validate() != nil {
			d.err = ErrMalformed
		}
	case SetMember:
		c.MemberID, c.MemberAPIAddr = d.str(), d.str()
	default:
		return Command{}, fmt.Errorf("%w: command type %d", ErrMalformed, frame[0])
	}
	if d.err != nil || len(d.b) != 0 {
		return Command{}, fmt.Errorf("%w: %s frame", ErrMalformed, c.Type)
	}
	return c, nil
}

// Apply applies a command frame to m. A frame that does not decode is
// ErrMalformed and leaves m as it was.
func (m *Meta) Apply(frame []byte) error {
	c, err := DecodeFrame(frame)
	if err != nil {
		return err
	}
	m.ApplyCommand(&c)
	return nil
}

// ApplyCommand applies c to m.
func (m *Meta) ApplyCommand(c *Command) {
	switch c.Type {
	case CreateTopic:
		m.Topics[c.Topic.Name] = c.Topic
	case UpdateTopic:
		m.UpdateTopic(c.Topic.Name, c.Topic.Queues, c.Topic.Perm)
	case DeleteTopic:
		m.DeleteTopic(c.Topic.Name)
	case CommitOffsets:
		for _, oc := range c.Commits {
			m.Offsets[OffsetKey{oc.Group, QueueKey{oc.Topic, oc.QueueID}}] = oc.Offset
		}
	case SetDedup:
		m.Producers.Config = c.Dedup
	case SetMember:
		m.Members[c.MemberID] = c.MemberAPIAddr
	}
}

// DeletedTopic is the topic a delete frame deletes (ok false for any other
// frame).
func DeletedTopic(frame []byte) (name string, ok bool) {
	if len(frame) == 0 || CommandType(frame[0]) != DeleteTopic {
		return "", false
	}
	c, err := DecodeFrame(frame)
	return c.Topic.Name, err == nil
}
