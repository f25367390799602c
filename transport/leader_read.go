package transport

import (
	"context"
	"errors"

	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
	"github.com/raftmq/raftmq/store"
)

// leaderRead lets only the verified leader answer a read that must not go
// back in time (committed offsets; lookups beyond this node's applied log,
// lookupApplied). forwarded is true when this node may not answer: resp and
// err are then the answer of the leader (or the reason it could not be
// asked).
func leaderRead[R any](s *Server, ctx context.Context, call func(context.Context, pb.RaftMQClient) (R, error)) (resp R, forwarded bool, err error) {
	lr, ok := s.b.(LeaderReader)
	if !ok {
		return resp, false, nil
	}
	if verr := lr.VerifyLeaderRead(ctx); verr != nil {
		resp, err = forward(s, ctx, verr, call)
		return resp, true, err
	}
	return resp, false, nil
}

// lookupApplied reads the message at commitlog offset phy from this node's
// store. A node that has not applied that far (store.ErrNotApplied: a
// lagging follower, or the old leader a client still calls after a
// failover) may not answer "no such offset" for an acknowledged write:
// the verified leader answers instead, through call (forwarded is then
// true and resp, err are its answer).
func lookupApplied[R any](s *Server, ctx context.Context, phy int64, call func(context.Context, pb.RaftMQClient) (R, error)) (m store.Message, resp R, forwarded bool, err error) {
	m, err = s.b.Reader().LookupByOffset(phy)
	if !errors.Is(err, store.ErrNotApplied) {
		return m, resp, false, err
	}
	if resp, fwd, ferr := leaderRead(s, ctx, call); fwd {
		return m, resp, true, ferr
	}
	// This node is the verified leader: it has applied every acknowledged
	// write, so its answer now is the answer.
	m, err = s.b.Reader().LookupByOffset(phy)
	return m, resp, false, err
}
