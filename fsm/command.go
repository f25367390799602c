package fsm

import (
	"errors"
	"fmt"
	"math"

	"github.com/raftmq/raftmq/internal/entrycodec"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/meta"
	"github.com/raftmq/raftmq/store"
)

// CommandType is the second byte of every Raft log entry the FSM understands.
type CommandType uint8

// Command types. Values are part of the Raft log format (see format.go):
// never renumber, only add. The admin commands (CommitOffsets to
// DeleteTopic) are package meta's: it owns their numbering in a Raft entry
// (meta.EntryCommitOffsets and the rest, meta.CommandType.EntryType) and
// their bodies.
const (
	CmdMessageBatch  CommandType = 1
	CmdCommitOffsets CommandType = meta.EntryCommitOffsets // 2
	CmdCreateTopic   CommandType = meta.EntryCreateTopic   // 3
	CmdUpdateTopic   CommandType = meta.EntryUpdateTopic   // 4
	CmdDeleteTopic   CommandType = meta.EntryDeleteTopic   // 5
	CmdSetMemberMeta CommandType = 6
	// CmdDeliverDue delivers the scheduled messages due by the entry's
	// store time (store.DeliverDue); the leader's scheduler proposes it.
	CmdDeliverDue CommandType = 7
	// CmdSetDedup sets the producer table's settings (meta's admin command
	// SetDedup); the leader proposes it when its configured settings
	// differ from the replicated ones.
	CmdSetDedup CommandType = meta.EntrySetDedup // 8
)

func (t CommandType) String() string {
	switch t {
	case CmdMessageBatch:
		return "MessageBatch"
	case CmdCommitOffsets:
		return "CommitOffsets"
	case CmdCreateTopic:
		return "CreateTopic"
	case CmdUpdateTopic:
		return "UpdateTopic"
	case CmdDeleteTopic:
		return "DeleteTopic"
	case CmdSetMemberMeta:
		return "SetMemberMeta"
	case CmdDeliverDue:
		return "DeliverDue"
	case CmdSetDedup:
		return "SetDedup"
	}
	return fmt.Sprintf("CommandType(%d)", uint8(t))
}

var (
	// ErrMalformed is returned (wrapped) for any entry that does not decode.
	ErrMalformed = errors.New("fsm: malformed command")
	// ErrUnknownCommand is returned (wrapped) for an unknown version or type.
	ErrUnknownCommand = errors.New("fsm: unknown command")
	// ErrTooLarge is returned when an encoded command would exceed a bound.
	ErrTooLarge = errors.New("fsm: command too large")
)

// Command is one decoded Raft log entry. Exactly the fields of its Type are
// set; byte slices of a decoded command alias the entry's data.
type Command struct {
	Type CommandType

	// MessageBatch, DeliverDue.
	LeaderTimestamp int64
	LeaderHost      message.HostPort
	Messages        []message.Message

	// CommitOffsets.
	Commits []store.OffsetCommit

	// CreateTopic, UpdateTopic.
	Topic store.TopicConfig

	// DeleteTopic.
	TopicName string

	// SetDedup.
	Dedup meta.DedupConfig

	// SetMemberMeta: the client API address of a Raft server.
	MemberID      string
	MemberAPIAddr string
}

// Encode appends the command's encoding to dst.
func (c *Command) Encode(dst []byte) ([]byte, error) {
	e := newEncoder(append(dst, CommandVersion, byte(c.Type)))
	switch c.Type {
	case CmdMessageBatch:
		if len(c.Messages) > MaxBatchMessages {
			return dst, fmt.Errorf("%w: %d messages > %d", ErrTooLarge, len(c.Messages), MaxBatchMessages)
		}
		e.I64(c.LeaderTimestamp)
		e.host(c.LeaderHost)
		e.Uvarint(uint64(len(c.Messages)))
		for i := range c.Messages {
			e.message(&c.Messages[i])
		}
	case CmdCommitOffsets, CmdCreateTopic, CmdUpdateTopic, CmdDeleteTopic, CmdSetDedup:
		e.admin(c)
	case CmdSetMemberMeta:
		e.str(c.MemberID)
		e.str(c.MemberAPIAddr)
	case CmdDeliverDue:
		e.I64(c.LeaderTimestamp)
		e.host(c.LeaderHost)
	default:
		return dst, fmt.Errorf("%w: type %d", ErrUnknownCommand, c.Type)
	}
	if e.Err != nil {
		return dst, e.Err
	}
	if len(e.Buf)-len(dst) > MaxCommandBytes {
		return dst, fmt.Errorf("%w: %d bytes > %d", ErrTooLarge, len(e.Buf)-len(dst), MaxCommandBytes)
	}
	return e.Buf, nil
}

// EncodeMessageBatch appends the encoding of a MessageBatch command whose
// messages are the concatenation of groups (count in all) to dst. It equals
// (&Command{Type: CmdMessageBatch, ...}).Encode(dst) without first copying
// the messages into one slice.
func EncodeMessageBatch(dst []byte, leaderTS int64, leaderHost message.HostPort, count int, groups ...[]message.Message) ([]byte, error) {
	if count > MaxBatchMessages {
		return dst, fmt.Errorf("%w: %d messages > %d", ErrTooLarge, count, MaxBatchMessages)
	}
	n := 0
	for _, g := range groups {
		n += len(g)
	}
	if n != count {
		return dst, fmt.Errorf("%w: %d messages, %d announced", ErrMalformed, n, count)
	}
	e := newEncoder(append(dst, CommandVersion, byte(CmdMessageBatch)))
	e.I64(leaderTS)
	e.host(leaderHost)
	e.Uvarint(uint64(count))
	for _, g := range groups {
		for i := range g {
			e.message(&g[i])
		}
	}
	if e.Err != nil {
		return dst, e.Err
	}
	if len(e.Buf)-len(dst) > MaxCommandBytes {
		return dst, fmt.Errorf("%w: %d bytes > %d", ErrTooLarge, len(e.Buf)-len(dst), MaxCommandBytes)
	}
	return e.Buf, nil
}

// DecodeCommand decodes one entry. It never panics, and it allocates at most
// in proportion to len(data).
func DecodeCommand(data []byte) (Command, error) {
	var c Command
	if len(data) < 2 {
		return c, fmt.Errorf("%w: %d bytes", ErrMalformed, len(data))
	}
	if data[0] != CommandVersion {
		return c, fmt.Errorf("%w: version %d", ErrUnknownCommand, data[0])
	}
	c.Type = CommandType(data[1])
	d := newDecoder(data[2:])
	switch c.Type {
	case CmdMessageBatch:
		c.LeaderTimestamp = d.I64()
		c.LeaderHost = d.host()
		n := d.Count(MaxBatchMessages, minMessageBytes)
		if n > 0 {
			c.Messages = make([]message.Message, n)
		}
		for i := 0; i < n && d.Err == nil; i++ {
			d.message(&c.Messages[i])
		}
	case CmdCommitOffsets, CmdCreateTopic, CmdUpdateTopic, CmdDeleteTopic, CmdSetDedup:
		d.admin(&c)
	case CmdSetMemberMeta:
		c.MemberID, c.MemberAPIAddr = d.str(), d.str()
	case CmdDeliverDue:
		c.LeaderTimestamp = d.I64()
		c.LeaderHost = d.host()
	default:
		return Command{}, fmt.Errorf("%w: type %d", ErrUnknownCommand, data[1])
	}
	if d.Err == nil && len(d.Buf) != 0 {
		d.Err = fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(d.Buf))
	}
	if d.Err != nil {
		return Command{}, fmt.Errorf("%s: %w", c.Type, d.Err)
	}
	return c, nil
}

// admin encodes an admin command's body (package meta owns it).
func (e *encoder) admin(c *Command) {
	mc := c.admin()
	buf, err := mc.AppendEntryBody(e.Buf)
	switch {
	case errors.Is(err, meta.ErrTooLarge):
		e.Err = fmt.Errorf("%w: %w", ErrTooLarge, err)
	case err != nil:
		e.Err = fmt.Errorf("%w: %w", ErrUnknownCommand, err)
	}
	e.Buf = buf
}

// admin is c as the admin command it carries.
func (c *Command) admin() meta.Command {
	t, _ := meta.CommandOfEntry(byte(c.Type))
	mc := meta.Command{Type: t, Topic: c.Topic, Commits: c.Commits, Dedup: c.Dedup}
	if c.Type == CmdDeleteTopic {
		mc.Topic = meta.TopicConfig{Name: c.TopicName}
	}
	return mc
}

// admin decodes the rest of the entry as the body of c's admin command.
func (d *decoder) admin(c *Command) {
	t, _ := meta.CommandOfEntry(byte(c.Type))
	mc, err := meta.DecodeEntryBody(t, d.Buf)
	d.Buf = nil
	if err != nil {
		d.Err = fmt.Errorf("%w: %w", ErrMalformed, err)
		return
	}
	c.Commits, c.Dedup = mc.Commits, mc.Dedup
	if c.Type == CmdDeleteTopic {
		c.TopicName = mc.Topic.Name
	} else {
		c.Topic = mc.Topic
	}
}

// encoder writes entry fields (entrycodec) and the FSM's compound ones.
type encoder struct{ entrycodec.Encoder }

func newEncoder(buf []byte) encoder {
	return encoder{entrycodec.Encoder{Buf: buf, TooLarge: ErrTooLarge}}
}

func (e *encoder) host(h message.HostPort) {
	e.Buf = append(e.Buf, h.IP[:]...)
	e.I32(h.Port)
}

func (e *encoder) str(s string) { e.Str(s, MaxStringBytes) }

func (e *encoder) message(m *message.Message) {
	e.str(m.Topic)
	e.I32(m.QueueID)
	e.I32(m.Flag)
	e.I32(m.SysFlag)
	e.I64(m.BornTimestamp)
	e.host(m.BornHost)
	e.I32(m.ReconsumeTimes)
	e.I64(m.PreparedTxOffset)
	e.Bytes(m.Body, MaxCommandBytes)
	e.Bytes(m.Properties, math.MaxUint16)
}

// decoder reads entry fields (entrycodec) and the FSM's compound ones.
type decoder struct {
	entrycodec.Decoder
	topic string // the previous message's topic, reused while equal (one allocation per batch, not per message)
}

func newDecoder(buf []byte) decoder {
	return decoder{Decoder: entrycodec.Decoder{Buf: buf, Malformed: ErrMalformed}}
}

func (d *decoder) host() message.HostPort {
	var h message.HostPort
	if b := d.Take(4, "host"); b != nil {
		copy(h.IP[:], b)
	}
	h.Port = d.I32()
	return h
}

func (d *decoder) str() string { return d.Str(MaxStringBytes) }

// topicStr is str, returning the previous topic's string when the bytes are
// the same.
func (d *decoder) topicStr() string {
	b := d.Bytes(MaxStringBytes, "string")
	if string(b) != d.topic { // no allocation for the comparison
		d.topic = string(b)
	}
	return d.topic
}

func (d *decoder) message(m *message.Message) {
	m.Topic = d.topicStr()
	m.QueueID = d.I32()
	m.Flag = d.I32()
	m.SysFlag = d.I32()
	m.BornTimestamp = d.I64()
	m.BornHost = d.host()
	m.ReconsumeTimes = d.I32()
	m.PreparedTxOffset = d.I64()
	m.Body = d.Bytes(MaxCommandBytes, "body")
	m.Properties = d.Bytes(math.MaxUint16, "properties")
}
