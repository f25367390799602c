package commitlog

import (
	"errors"
	"fmt"
)

// ErrCorrupt matches every error that says stored bytes are not what the
// writer wrote: the decode errors below and *CorruptionError.
var ErrCorrupt = errors.New("commitlog: corrupt data")

// formatError is a decode sentinel that also matches ErrCorrupt.
type formatError string

func (e formatError) Error() string        { return string(e) }
func (e formatError) Is(target error) bool { return target == ErrCorrupt }

// Decode errors; each also matches ErrCorrupt with errors.Is.
var (
	ErrShort       error = formatError("commitlog: record extends past the data")
	ErrBadMagic    error = formatError("commitlog: bad magic code")
	ErrBadSize     error = formatError("commitlog: bad size field")
	ErrBadLength   error = formatError("commitlog: field lengths do not add up to TOTALSIZE")
	ErrBodyCRC     error = formatError("commitlog: body CRC mismatch")
	ErrBadFrame    error = formatError("commitlog: bad frame field")
	ErrEntryCRC    error = formatError("commitlog: entry CRC32C mismatch")
	ErrBadPosition error = formatError("commitlog: PHYSICALOFFSET differs from the record's position")
	// ErrBadQueue: QUEUEID, QUEUEOFFSET or TOPIC differ from the consume-queue
	// unit that points at the record.
	ErrBadQueue error = formatError("commitlog: record is not the one its consume-queue unit names")
)

// Input and API errors.
var (
	ErrBodyTooLarge       = errors.New("commitlog: message body too large")
	ErrPropertiesTooLarge = errors.New("commitlog: message properties too large")
	ErrBadTopic           = errors.New("commitlog: bad topic name")
	ErrBadQueueID         = errors.New("commitlog: bad queue id")
	ErrBadSysFlag         = errors.New("commitlog: sysflag selects IPv6 hosts")
	ErrBadProperty        = errors.New("commitlog: bad property key or value")
	ErrBadMsgID           = errors.New("commitlog: bad offset message id")
	ErrShortBuffer        = errors.New("commitlog: buffer too small")
	ErrBadEntry           = errors.New("commitlog: bad entry")
	ErrEntryTooLarge      = errors.New("commitlog: entry larger than a segment")
	ErrOutOfRange         = errors.New("commitlog: offset out of range")
	ErrNotRecord          = errors.New("commitlog: no message record at offset")
	// ErrTornTail: the scan stopped at an entry that is incomplete and
	// followed only by zeros: the tail of an interrupted write. Truncate at
	// Scanner.Pos().
	ErrTornTail = errors.New("commitlog: torn tail")
)

// CorruptionError reports damage in the middle of the log: something valid
// (or the scan position) lies beyond it, so it is not a torn tail.
type CorruptionError struct {
	File   string // segment file
	Offset int64  // absolute offset of the entry (or record) that failed
	Reason string
	Err    error // the decode error, if any
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("commitlog: corruption in %s at offset %d: %s", e.File, e.Offset, e.Reason)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorrupt }

// Unwrap returns the underlying decode error.
func (e *CorruptionError) Unwrap() error { return e.Err }
