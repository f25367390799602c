package commitlog

import (
	"errors"
	"fmt"

	"github.com/raftmq/raftmq/message"
)

// Errors of the log. Record and frame decode errors are message's; they and
// *CorruptionError match message.ErrCorrupt.
var (
	ErrBadEntry      = errors.New("commitlog: bad entry")
	ErrEntryTooLarge = errors.New("commitlog: entry larger than a segment")
	ErrOutOfRange    = errors.New("commitlog: offset out of range")
	ErrNotRecord     = errors.New("commitlog: no message record at offset")
	// ErrTornTail: the scan stopped at an entry that is incomplete and
	// followed only by zeros: the tail of an interrupted write. Truncate at
	// Scanner.Pos().
	ErrTornTail = errors.New("commitlog: torn tail")
	// ErrRead: a segment could not be read (an I/O error from the file
	// system). It says nothing about the bytes: never truncate on it.
	ErrRead = errors.New("commitlog: read failed")
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

// Is makes errors.Is(err, message.ErrCorrupt) true.
func (e *CorruptionError) Is(target error) bool { return target == message.ErrCorrupt }

// Unwrap returns the underlying decode error.
func (e *CorruptionError) Unwrap() error { return e.Err }
