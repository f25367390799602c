package consumequeue

import "errors"

var (
	// ErrShortUnit: fewer than UnitSize bytes to decode.
	ErrShortUnit = errors.New("consumequeue: unit shorter than 20 bytes")
	// ErrGap: a Put would leave a hole (queueOffset > MaxOffset); nothing was
	// written.
	ErrGap = errors.New("consumequeue: queue offset leaves a gap")
	// ErrOffset: a queue offset outside [MinOffset, MaxOffset).
	ErrOffset = errors.New("consumequeue: queue offset out of range")
	// ErrBadUnit: a unit with a negative offset or a non-positive size.
	ErrBadUnit = errors.New("consumequeue: invalid unit")
	// ErrTopic: an empty topic or one that is not a safe directory name.
	ErrTopic = errors.New("consumequeue: invalid topic name")
	// ErrQueueID: a negative queue id.
	ErrQueueID = errors.New("consumequeue: invalid queue id")
	// ErrConfig: a configuration that fails Validate.
	ErrConfig = errors.New("consumequeue: invalid config")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("consumequeue: closed")
	// ErrCorrupt: a queue file whose content is inconsistent (e.g. units not
	// ordered by physical offset where a search relies on it).
	ErrCorrupt = errors.New("consumequeue: corrupt queue")
)
