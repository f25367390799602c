package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/meta"
	"github.com/raftmq/raftmq/store"
)

// CommandType is the second byte of every Raft log entry the FSM understands.
type CommandType uint8

// Command types. Values are part of the Raft log format (see format.go):
// never renumber, only add. The admin commands (CommitOffsets to
// DeleteTopic) are package meta's: it owns their numbering in a Raft entry
// (meta.CommandType.EntryType) and their bodies.
const (
	CmdMessageBatch  CommandType = 1
	CmdCommitOffsets CommandType = 2 // meta.CommitOffsets
	CmdCreateTopic   CommandType = 3 // meta.CreateTopic
	CmdUpdateTopic   CommandType = 4 // meta.UpdateTopic
	CmdDeleteTopic   CommandType = 5 // meta.DeleteTopic
	CmdSetMemberMeta CommandType = 6
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

	// MessageBatch.
	LeaderTimestamp int64
	LeaderHost      message.HostPort
	Messages        []message.Message

	// CommitOffsets.
	Commits []store.OffsetCommit

	// CreateTopic, UpdateTopic.
	Topic store.TopicConfig

	// DeleteTopic.
	TopicName string

	// SetMemberMeta: the client API address of a Raft server.
	MemberID      string
	MemberAPIAddr string
}

// Encode appends the command's encoding to dst.
func (c *Command) Encode(dst []byte) ([]byte, error) {
	e := encoder{buf: append(dst, CommandVersion, byte(c.Type))}
	switch c.Type {
	case CmdMessageBatch:
		if len(c.Messages) > MaxBatchMessages {
			return dst, fmt.Errorf("%w: %d messages > %d", ErrTooLarge, len(c.Messages), MaxBatchMessages)
		}
		e.i64(c.LeaderTimestamp)
		e.host(c.LeaderHost)
		e.uvarint(uint64(len(c.Messages)))
		for i := range c.Messages {
			e.message(&c.Messages[i])
		}
	case CmdCommitOffsets, CmdCreateTopic, CmdUpdateTopic, CmdDeleteTopic:
		e.admin(c)
	case CmdSetMemberMeta:
		e.str(c.MemberID)
		e.str(c.MemberAPIAddr)
	default:
		return dst, fmt.Errorf("%w: type %d", ErrUnknownCommand, c.Type)
	}
	if e.err != nil {
		return dst, e.err
	}
	if len(e.buf)-len(dst) > MaxCommandBytes {
		return dst, fmt.Errorf("%w: %d bytes > %d", ErrTooLarge, len(e.buf)-len(dst), MaxCommandBytes)
	}
	return e.buf, nil
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
	e := encoder{buf: append(dst, CommandVersion, byte(CmdMessageBatch))}
	e.i64(leaderTS)
	e.host(leaderHost)
	e.uvarint(uint64(count))
	for _, g := range groups {
		for i := range g {
			e.message(&g[i])
		}
	}
	if e.err != nil {
		return dst, e.err
	}
	if len(e.buf)-len(dst) > MaxCommandBytes {
		return dst, fmt.Errorf("%w: %d bytes > %d", ErrTooLarge, len(e.buf)-len(dst), MaxCommandBytes)
	}
	return e.buf, nil
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
	d := decoder{buf: data[2:]}
	switch c.Type {
	case CmdMessageBatch:
		c.LeaderTimestamp = d.i64()
		c.LeaderHost = d.host()
		n := d.count(MaxBatchMessages, minMessageBytes)
		if n > 0 {
			c.Messages = make([]message.Message, n)
		}
		for i := 0; i < n && d.err == nil; i++ {
			d.message(&c.Messages[i])
		}
	case CmdCommitOffsets, CmdCreateTopic, CmdUpdateTopic, CmdDeleteTopic:
		d.admin(&c)
	case CmdSetMemberMeta:
		c.MemberID, c.MemberAPIAddr = d.str(), d.str()
	default:
		return Command{}, fmt.Errorf("%w: type %d", ErrUnknownCommand, data[1])
	}
	if d.err == nil && len(d.buf) != 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(d.buf))
	}
	if d.err != nil {
		return Command{}, fmt.Errorf("%s: %w", c.Type, d.err)
	}
	return c, nil
}

// admin encodes an admin command's body (package meta owns it).
func (e *encoder) admin(c *Command) {
	mc := c.admin()
	buf, err := mc.AppendEntryBody(e.buf)
	switch {
	case errors.Is(err, meta.ErrTooLarge):
		e.err = fmt.Errorf("%w: %w", ErrTooLarge, err)
	case err != nil:
		e.err = fmt.Errorf("%w: %w", ErrUnknownCommand, err)
	}
	e.buf = buf
}

// admin is c as the admin command it carries.
func (c *Command) admin() meta.Command {
	t, _ := meta.CommandOfEntry(byte(c.Type))
	mc := meta.Command{Type: t, Topic: c.Topic, Commits: c.Commits}
	if c.Type == CmdDeleteTopic {
		mc.Topic = meta.TopicConfig{Name: c.TopicName}
	}
	return mc
}

// admin decodes the rest of the entry as the body of c's admin command.
func (d *decoder) admin(c *Command) {
	t, _ := meta.CommandOfEntry(byte(c.Type))
	mc, err := meta.DecodeEntryBody(t, d.buf)
	d.buf = nil
	if err != nil {
		d.err = fmt.Errorf("%w: %w", ErrMalformed, err)
		return
	}
	c.Commits = mc.Commits
	if c.Type == CmdDeleteTopic {
		c.TopicName = mc.Topic.Name
	} else {
		c.Topic = mc.Topic
	}
}

type encoder struct {
	buf []byte
	err error
}

func (e *encoder) i32(v int32)      { e.buf = binary.BigEndian.AppendUint32(e.buf, uint32(v)) }
func (e *encoder) i64(v int64)      { e.buf = binary.BigEndian.AppendUint64(e.buf, uint64(v)) }
func (e *encoder) uvarint(v uint64) { e.buf = binary.AppendUvarint(e.buf, v) }
func (e *encoder) host(h message.HostPort) {
	e.buf = append(e.buf, h.IP[:]...)
	e.i32(h.Port)
}

func (e *encoder) bytes(b []byte, limit int) {
	if len(b) > limit && e.err == nil {
		e.err = fmt.Errorf("%w: field of %d bytes > %d", ErrTooLarge, len(b), limit)
	}
	e.uvarint(uint64(len(b)))
	e.buf = append(e.buf, b...)
}

func (e *encoder) str(s string) {
	if len(s) > MaxStringBytes && e.err == nil {
		e.err = fmt.Errorf("%w: string of %d bytes > %d", ErrTooLarge, len(s), MaxStringBytes)
	}
	e.uvarint(uint64(len(s)))
	e.buf = append(e.buf, s...)
}

func (e *encoder) message(m *message.Message) {
	e.str(m.Topic)
	e.i32(m.QueueID)
	e.i32(m.Flag)
	e.i32(m.SysFlag)
	e.i64(m.BornTimestamp)
	e.host(m.BornHost)
	e.i32(m.ReconsumeTimes)
	e.i64(m.PreparedTxOffset)
	e.bytes(m.Body, MaxCommandBytes)
	e.bytes(m.Properties, math.MaxUint16)
}

// decoder reads big-endian fields; after the first error every read returns
// a zero value, so callers check err once.
type decoder struct {
	buf   []byte
	err   error
	topic string // the previous message's topic, reused while equal (one allocation per batch, not per message)
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: short or bad %s", ErrMalformed, what)
	}
	d.buf = nil
}

func (d *decoder) take(n int, what string) []byte {
	if d.err != nil || n < 0 || n > len(d.buf) {
		d.fail(what)
		return nil
	}
	b := d.buf[:n:n]
	d.buf = d.buf[n:]
	return b
}

func (d *decoder) i32() int32 {
	b := d.take(4, "int32")
	if b == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(b))
}

func (d *decoder) i64() int64 {
	b := d.take(8, "int64")
	if b == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(b))
}

func (d *decoder) host() message.HostPort {
	var h message.HostPort
	if b := d.take(4, "host"); b != nil {
		copy(h.IP[:], b)
	}
	h.Port = d.i32()
	return h
}

func (d *decoder) uvarint(limit uint64, what string) int {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.buf)
	// Only the minimal encoding is accepted, so an entry has one encoding.
	if n <= 0 || v > limit || n > 1 && d.buf[n-1] == 0 {
		d.fail(what)
		return 0
	}
	d.buf = d.buf[n:]
	return int(v)
}

// count reads an element count and checks it against both limit and the
// bytes left (each element takes at least minSize), which bounds allocation.
func (d *decoder) count(limit, minSize int) int {
	n := d.uvarint(uint64(limit), "count")
	if n*minSize > len(d.buf) {
		d.fail("count")
		return 0
	}
	return n
}

func (d *decoder) bytes(limit int, what string) []byte {
	n := d.uvarint(uint64(limit), what)
	b := d.take(n, what)
	if n == 0 {
		return nil
	}
	return b
}

func (d *decoder) str() string { return string(d.bytes(MaxStringBytes, "string")) }

// topicStr is str, returning the previous topic's string when the bytes are
// the same.
func (d *decoder) topicStr() string {
	b := d.bytes(MaxStringBytes, "string")
	if string(b) != d.topic { // no allocation for the comparison
		d.topic = string(b)
	}
	return d.topic
}

func (d *decoder) message(m *message.Message) {
	m.Topic = d.topicStr()
	m.QueueID = d.i32()
	m.Flag = d.i32()
	m.SysFlag = d.i32()
	m.BornTimestamp = d.i64()
	m.BornHost = d.host()
	m.ReconsumeTimes = d.i32()
	m.PreparedTxOffset = d.i64()
	m.Body = d.bytes(MaxCommandBytes, "body")
	m.Properties = d.bytes(math.MaxUint16, "properties")
}
