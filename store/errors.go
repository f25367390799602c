package store

import (
	"errors"
	"fmt"

	"github.com/raftmq/raftmq/meta"
)

// ErrorKind classifies an error of the store for its callers: the FSM (a
// refusal is the same on every replica that applies the same entry;
// anything else is local to this node, so the node stops) and the API (the
// status code a client gets). KindOf is its one definition.
type ErrorKind int

const (
	// KindLocal: not one of the store's refusals of a request — an I/O
	// failure, a closed or failed-closed store, a bug. Another replica
	// applying the same entry may well succeed.
	KindLocal ErrorKind = iota
	// KindBadInput: the request is malformed or out of range.
	KindBadInput
	// KindNotFound: no such topic, message or offset.
	KindNotFound
	// KindExists: what the request creates exists already.
	KindExists
	// KindLimit: the request would pass a configured limit of the store.
	KindLimit
)

// kinds lists the store's refusals; every other error is KindLocal.
var kinds = []struct {
	err  error
	kind ErrorKind
}{
	{ErrBadTopic, KindBadInput}, {ErrBadQueue, KindBadInput}, {ErrMessageTooLarge, KindBadInput},
	{ErrPropsTooLarge, KindBadInput}, {ErrBadOffset, KindBadInput}, {ErrBadCommand, KindBadInput},
	{ErrBadMessage, KindBadInput}, {ErrSeqTooOld, KindBadInput},
	{ErrNoSuchTopic, KindNotFound}, {ErrNotFound, KindNotFound},
	{ErrTopicExists, KindExists},
	{ErrQueueLimit, KindLimit},
}

// KindOf classifies err (wrapped or not).
func KindOf(err error) ErrorKind {
	for _, k := range kinds {
		if errors.Is(err, k.err) {
			return k.kind
		}
	}
	return KindLocal
}

// Deterministic reports whether err is a refusal every replica applying the
// same entry to the same state makes too (any kind but KindLocal).
func Deterministic(err error) bool { return err != nil && KindOf(err) != KindLocal }

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
	ErrBadMessage      = errors.New("store: malformed message")
	ErrQueueLimit      = errors.New("store: the queues of all topics would exceed MaxTotalQueues")
	// ErrSeqTooOld: an idempotent message's producer sequence lies below
	// the window of sequences the store remembers for its producer, so
	// whether it was stored cannot be told; it is refused, never stored
	// twice.
	ErrSeqTooOld = meta.ErrSeqTooOld
	// ErrFailedClosed: a sync (msync, fsync, checkpoint write) or a write
	// of an entry failed. What the failed operation covered may or may not
	// be on disk (Linux drops the dirty pages of a failed fsync, and a
	// retried one succeeds), so the store fails closed: it takes no more
	// writes and writes no more checkpoints, and its Close leaves the abort
	// file, so the next Open recovers from what is really on disk.
	ErrFailedClosed = errors.New("store: an I/O operation failed; the store takes no more writes until it is reopened")
	// ErrSyncFailed: a sync of written data (the commitlog, consume queues
	// or index) failed; wrapped, with ErrFailedClosed, in the failure. Its
	// pages may be lost on disk while the page cache still shows them, so
	// unlike a write refused for lack of space (vfs.IsNoSpace without
	// ErrSyncFailed) it is not waited out by reopening: the node stops.
	ErrSyncFailed = errors.New("store: sync of written data failed")
)

// ErrNotApplied: a commitlog offset lies at or beyond the end this store has
// applied. A lagging replica says so about an offset its leader may already
// hold, so only a store that has applied every committed entry (the verified
// leader's) may take it for a bad offset. It wraps ErrBadOffset.
var ErrNotApplied = fmt.Errorf("%w: beyond the applied log", ErrBadOffset)
