package meta

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The admin commands in a Raft log entry: the FSM's entry is a version
// byte, a type byte and a body; for an admin command the type byte is its
// EntryType and the body is what AppendEntryBody writes. Its fields differ
// from a command frame's: str = uvarint length (at most MaxStringBytes) +
// bytes, count = uvarint (at most MaxCommits), integers big-endian, and
// every uvarint in its minimal encoding, so an entry has one encoding.

// Bounds of the Raft entry body, enforced by encoder and decoder.
const (
	MaxStringBytes = 1024
	MaxCommits     = 1 << 16

	minCommitBytes = 1 + 1 + 4 + 8 // empty group and topic
)

// ErrTooLarge is returned (wrapped) when a command would exceed a bound of
// the Raft entry body.
var ErrTooLarge = errors.New("meta: command too large")

// entryTypes maps each command to its Raft entry type byte (the FSM's
// numbering, older than this package's; both are on disk).
var entryTypes = [...]byte{CommitOffsets: 2, CreateTopic: 3, UpdateTopic: 4, DeleteTopic: 5}

// EntryType is the type byte of t in a Raft log entry, 0 for no command.
func (t CommandType) EntryType() byte {
	if int(t) >= len(entryTypes) {
		return 0
	}
	return entryTypes[t]
}

// CommandOfEntry is the admin command whose Raft entry type byte is b (ok
// false for any other entry type).
func CommandOfEntry(b byte) (CommandType, bool) {
	for t, e := range entryTypes {
		if e == b && b != 0 {
			return CommandType(t), true
		}
	}
	return 0, false
}

// AppendEntryBody appends the Raft entry body of c to dst.
func (c *Command) AppendEntryBody(dst []byte) ([]byte, error) {
	e := entryEncoder{buf: dst}
	switch c.Type {
	case CommitOffsets:
		if len(c.Commits) > MaxCommits {
			return dst, fmt.Errorf("%w: %d commits > %d", ErrTooLarge, len(c.Commits), MaxCommits)
		}
		e.buf = binary.AppendUvarint(e.buf, uint64(len(c.Commits)))
		for _, oc := range c.Commits {
			e.str(oc.Group)
			e.str(oc.Topic)
			e.i32(oc.QueueID)
			e.i64(oc.Offset)
		}
	case CreateTopic, UpdateTopic:
		e.str(c.Topic.Name)
		e.i32(c.Topic.Queues)
		e.i32(c.Topic.Perm)
	case DeleteTopic:
		e.str(c.Topic.Name)
	default:
		return dst, fmt.Errorf("%w: %s", ErrMalformed, c.Type)
	}
	if e.err != nil {
		return dst, e.err
	}
	return e.buf, nil
}

// DecodeEntryBody decodes the Raft entry body of a command of type t. It
// never panics, allocates at most in proportion to len(body) and refuses a
// short field, a count that cannot fit the bytes left and trailing bytes
// (ErrMalformed).
func DecodeEntryBody(t CommandType, body []byte) (Command, error) {
	c := Command{Type: t}
	d := entryDecoder{buf: body}
	switch t {
	case CommitOffsets:
		n := d.count()
		if n > 0 {
			c.Commits = make([]OffsetCommit, n)
		}
		for i := 0; i < n && d.err == nil; i++ {
			oc := &c.Commits[i]
			oc.Group, oc.Topic = d.str(), d.str()
			oc.QueueID, oc.Offset = d.i32(), d.i64()
		}
	case CreateTopic, UpdateTopic:
		c.Topic.Name = d.str()
		c.Topic.Queues, c.Topic.Perm = d.i32(), d.i32()
	case DeleteTopic:
		c.Topic.Name = d.str()
	default:
		return Command{}, fmt.Errorf("%w: %s", ErrMalformed, t)
	}
	if d.err == nil && len(d.buf) != 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(d.buf))
	}
	if d.err != nil {
		return Command{}, d.err
	}
	return c, nil
}

// entryEncoder writes Raft entry body fields; the first bound exceeded is
// kept in err.
type entryEncoder struct {
	buf []byte
	err error
}

func (e *entryEncoder) i32(v int32) { e.buf = binary.BigEndian.AppendUint32(e.buf, uint32(v)) }
func (e *entryEncoder) i64(v int64) { e.buf = binary.BigEndian.AppendUint64(e.buf, uint64(v)) }

func (e *entryEncoder) str(s string) {
	if len(s) > MaxStringBytes && e.err == nil {
		e.err = fmt.Errorf("%w: string of %d bytes > %d", ErrTooLarge, len(s), MaxStringBytes)
	}
	e.buf = binary.AppendUvarint(e.buf, uint64(len(s)))
	e.buf = append(e.buf, s...)
}

// entryDecoder reads Raft entry body fields; after the first error every
// read returns a zero value, so callers check err once.
type entryDecoder struct {
	buf []byte
	err error
}

func (d *entryDecoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: short or bad %s", ErrMalformed, what)
	}
	d.buf = nil
}

func (d *entryDecoder) take(n int, what string) []byte {
	if d.err != nil || n < 0 || n > len(d.buf) {
		d.fail(what)
		return nil
	}
	b := d.buf[:n:n]
	d.buf = d.buf[n:]
	return b
}

func (d *entryDecoder) i32() int32 {
	if b := d.take(4, "int32"); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (d *entryDecoder) i64() int64 {
	if b := d.take(8, "int64"); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

// uvarint reads a minimally encoded uvarint of at most limit.
func (d *entryDecoder) uvarint(limit uint64, what string) int {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.buf)
	if n <= 0 || v > limit || n > 1 && d.buf[n-1] == 0 {
		d.fail(what)
		return 0
	}
	d.buf = d.buf[n:]
	return int(v)
}

// count reads a commit count, bounded by MaxCommits and by the bytes left.
func (d *entryDecoder) count() int {
	n := d.uvarint(MaxCommits, "count")
	if n*minCommitBytes > len(d.buf) {
		d.fail("count")
		return 0
	}
	return n
}

func (d *entryDecoder) str() string {
	n := d.uvarint(MaxStringBytes, "string")
	return string(d.take(n, "string"))
}
