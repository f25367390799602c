package meta

import (
	"errors"
	"fmt"

	"github.com/raftmq/raftmq/internal/entrycodec"
)

// The admin commands in a Raft log entry: the FSM's entry is a version
// byte, a type byte and a body; for an admin command the type byte is its
// EntryType and the body is what AppendEntryBody writes. Its fields are the
// Raft entry's (internal/entrycodec), not a command frame's: str = uvarint
// length (at most MaxStringBytes) + bytes, count = uvarint (at most
// MaxCommits), integers big-endian, and every uvarint in its minimal
// encoding, so an entry has one encoding.

// Bounds of the Raft entry body, enforced by encoder and decoder.
const (
	MaxStringBytes = 1024
	MaxCommits     = 1 << 16

	minCommitBytes = 1 + 1 + 4 + 8 // empty group and topic
)

// ErrTooLarge is returned (wrapped) when a command would exceed a bound of
// the Raft entry body.
var ErrTooLarge = errors.New("meta: command too large")

// The Raft entry type bytes of the admin commands: the FSM's numbering,
// older than this package's CommandType; both are on disk. They are the
// one definition: package fsm's command types 2 to 5 are these constants.
const (
	EntryCommitOffsets = 2
	EntryCreateTopic   = 3
	EntryUpdateTopic   = 4
	EntryDeleteTopic   = 5
	EntrySetDedup      = 8
)

// entryTypes maps each command to its Raft entry type byte.
var entryTypes = [...]byte{CommitOffsets: EntryCommitOffsets, CreateTopic: EntryCreateTopic,
	UpdateTopic: EntryUpdateTopic, DeleteTopic: EntryDeleteTopic, SetDedup: EntrySetDedup}

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
	e := entrycodec.Encoder{Buf: dst, TooLarge: ErrTooLarge}
	switch c.Type {
	case CommitOffsets:
		if len(c.Commits) > MaxCommits {
			return dst, fmt.Errorf("%w: %d commits > %d", ErrTooLarge, len(c.Commits), MaxCommits)
		}
		e.Uvarint(uint64(len(c.Commits)))
		for _, oc := range c.Commits {
			e.Str(oc.Group, MaxStringBytes)
			e.Str(oc.Topic, MaxStringBytes)
			e.I32(oc.QueueID)
			e.I64(oc.Offset)
		}
	case CreateTopic, UpdateTopic:
		e.Str(c.Topic.Name, MaxStringBytes)
		e.I32(c.Topic.Queues)
		e.I32(c.Topic.Perm)
	case DeleteTopic:
		e.Str(c.Topic.Name, MaxStringBytes)
	case SetDedup:
		if err := c.Dedup.Validate(); err != nil {
			return dst, err
		}
		e.I32(int32(c.Dedup.Window))
		e.I64(c.Dedup.Expiry)
	default:
		return dst, fmt.Errorf("%w: %s", ErrMalformed, c.Type)
	}
	if e.Err != nil {
		return dst, e.Err
	}
	return e.Buf, nil
}

// DecodeEntryBody decodes the Raft entry body of a command of type t. It
// never panics, allocates at most in proportion to len(body) and refuses a
// short field, a count that cannot fit the bytes left and trailing bytes
// (ErrMalformed).
func DecodeEntryBody(t CommandType, body []byte) (Command, error) {
	c := Command{Type: t}
	d := entrycodec.Decoder{Buf: body, Malformed: ErrMalformed}
	switch t {
	case CommitOffsets:
		n := d.Count(MaxCommits, minCommitBytes)
		if n > 0 {
			c.Commits = make([]OffsetCommit, n)
		}
		for i := 0; i < n && d.Err == nil; i++ {
			oc := &c.Commits[i]
			oc.Group, oc.Topic = d.Str(MaxStringBytes), d.Str(MaxStringBytes)
			oc.QueueID, oc.Offset = d.I32(), d.I64()
		}
	case CreateTopic, UpdateTopic:
		c.Topic.Name = d.Str(MaxStringBytes)
		c.Topic.Queues, c.Topic.Perm = d.I32(), d.I32()
	case DeleteTopic:
		c.Topic.Name = d.Str(MaxStringBytes)
	case SetDedup:
		c.Dedup = DedupConfig{Window: int(d.I32()), Expiry: d.I64()}
		if d.Err == nil {
			if err := c.Dedup.Validate(); err != nil {
				d.Err = err
			}
		}
	default:
		return Command{}, fmt.Errorf("%w: %s", ErrMalformed, t)
	}
	if d.Err == nil && len(d.Buf) != 0 {
		d.Err = fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(d.Buf))
	}
	if d.Err != nil {
		return Command{}, d.Err
	}
	return c, nil
}
