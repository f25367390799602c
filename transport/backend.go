package transport

import (
	"context"
	"errors"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/wire"
)

// API CONTRACT: node/ implements Backend; the gRPC server and its tests depend
// only on this interface. Add, don't change.

var (
	// ErrNotLeader is returned (wrapped) by a follower's write methods. The
	// server then forwards the request to ClusterStatus.LeaderAPIAddr.
	ErrNotLeader = errors.New("transport: not the leader")
	// ErrOutcomeUnknown means the entry was proposed but leadership was lost or
	// the wait timed out before the result was known: it may or may not apply.
	ErrOutcomeUnknown = errors.New("transport: outcome unknown")
	// ErrNoLeader means the cluster currently has no known leader.
	ErrNoLeader = errors.New("transport: no leader")
	// ErrOverloaded means the leader's queue of writes waiting for Raft was
	// full and stayed full: nothing was proposed, the write may be retried
	// after a backoff. The server answers codes.ResourceExhausted with the
	// ErrorInfo reason ReasonOverloaded.
	ErrOverloaded = errors.New("transport: leader overloaded")
	// ErrDiskFull: the leader's disk is at or above [store]
	// DiskWarningRatio; the send was refused before anything was proposed
	// (RESOURCE_EXHAUSTED; not retried: space comes back only when
	// retention or a topic delete frees it).
	ErrDiskFull = errors.New("transport: disk full")
)

// Backend is what the node exposes to the client-facing server.
type Backend interface {
	// Writes go through Raft on the leader. A follower returns an error
	// wrapping ErrNotLeader; the server then forwards the call to
	// ClusterStatus.LeaderAPIAddr. Per-message failures are reported in
	// PutResult.Err; the error return is for the whole batch.
	Send(ctx context.Context, msgs []message.Message) ([]store.PutResult, error)
	CommitOffsets(ctx context.Context, commits []store.OffsetCommit) error
	CreateTopic(ctx context.Context, t store.TopicConfig) error
	DeleteTopic(ctx context.Context, name string) error
	Join(ctx context.Context, id, raftAddr, apiAddr string) error
	Remove(ctx context.Context, id string) error
	Transfer(ctx context.Context, id string) error // "" = any

	// Reader serves reads from the local (committed) store.
	Reader() store.Reader
	// Status is a point-in-time view of this node and the cluster.
	Status() wire.ClusterStatus
}

// LeaderReader is implemented by backends that can serve a read consistent
// with every acknowledged write: VerifyLeaderRead returns nil when the local
// store may answer, or an error wrapping ErrNotLeader (the server forwards
// the read to the leader). A backend without it serves such reads locally.
type LeaderReader interface {
	VerifyLeaderRead(ctx context.Context) error
}
