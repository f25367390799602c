package store

import "errors"

var (
	ErrClosed          = errors.New("store: closed")
	ErrAlreadyApplied  = errors.New("store: raft index already applied")
	ErrBadTopic        = errors.New("store: illegal topic name")
	ErrNoSuchTopic     = errors.New("store: no such topic")
	ErrBadQueue        = errors.New("store: queue id out of range")
	ErrMessageTooLarge = errors.New("store: message body too large")
	ErrPropsTooLarge   = errors.New("store: properties too large")
	ErrBadOffset       = errors.New("store: offset out of range")
	ErrNotFound        = errors.New("store: not found")
	ErrTopicExists     = errors.New("store: topic exists")
	ErrBadConfig       = errors.New("store: bad config")
	ErrBadCommand      = errors.New("store: malformed command")
	// ErrFailedClosed: a sync (msync, fsync, checkpoint write) or a write
	// of an entry failed. What the failed operation covered may or may not
	// be on disk (Linux drops the dirty pages of a failed fsync, and a
	// retried one succeeds), so the store fails closed: it takes no more
	// writes and writes no more checkpoints, and its Close leaves the abort
	// file, so the next Open recovers from what is really on disk.
	ErrFailedClosed = errors.New("store: an I/O operation failed; the store takes no more writes until it is reopened")
)
