package message

import "errors"

// ErrCorrupt matches every error that says stored bytes are not what the
// writer wrote: the decode errors below, and the commitlog's corruption
// errors.
var ErrCorrupt = errors.New("message: corrupt data")

// formatError is a decode sentinel that also matches ErrCorrupt.
type formatError string

func (e formatError) Error() string        { return string(e) }
func (e formatError) Is(target error) bool { return target == ErrCorrupt }

// Decode errors; each also matches ErrCorrupt with errors.Is.
var (
	ErrShort       error = formatError("message: record extends past the data")
	ErrBadMagic    error = formatError("message: bad magic code")
	ErrBadSize     error = formatError("message: bad size field")
	ErrBadLength   error = formatError("message: field lengths do not add up to TOTALSIZE")
	ErrBodyCRC     error = formatError("message: body CRC mismatch")
	ErrBadFrame    error = formatError("message: bad frame field")
	ErrEntryCRC    error = formatError("message: entry CRC32C mismatch")
	ErrBadPosition error = formatError("message: PHYSICALOFFSET differs from the record's position")
	// ErrBadQueue: QUEUEID, QUEUEOFFSET or TOPIC differ from the consume-queue
	// unit that points at the record.
	ErrBadQueue error = formatError("message: record is not the one its consume-queue unit names")
)

// Input errors.
var (
	ErrBodyTooLarge       = errors.New("message: body too large")
	ErrPropertiesTooLarge = errors.New("message: properties too large")
	ErrBadTopic           = errors.New("message: bad topic name")
	ErrBadQueueID         = errors.New("message: bad queue id")
	ErrBadSysFlag         = errors.New("message: sysflag selects IPv6 hosts")
	ErrBadProperty        = errors.New("message: bad property key or value")
	ErrBadMsgID           = errors.New("message: bad offset message id")
	ErrShortBuffer        = errors.New("message: buffer too small")
)
