package client

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/wire"
)

// Errors returned by the client wrap one of these sentinels and the gRPC
// status error they came from (so status.Code works on them too).
var (
	// ErrOutcomeUnknown: the write reached a server but its fate is unknown
	// (leadership lost after proposing, deadline or connection loss after
	// sending). It may or may not have been applied; it is never retried.
	ErrOutcomeUnknown = errors.New("client: outcome unknown")
	// ErrUnavailable: no leader (or no server) could be reached before the
	// retries or the context ran out. Nothing was applied.
	ErrUnavailable = errors.New("client: cluster unavailable")
	// ErrOverloaded: the leader refused the write every time because its
	// queue of writes waiting for Raft was full (RESOURCE_EXHAUSTED, reason
	// OVERLOADED). Nothing was applied; retry later or send less at once.
	ErrOverloaded    = errors.New("client: leader overloaded")
	ErrInvalid       = errors.New("client: invalid argument")
	ErrNotFound      = errors.New("client: not found")
	ErrAlreadyExists = errors.New("client: already exists")
	ErrClosed        = errors.New("client: closed")
	ErrNoSeeds       = errors.New("client: no seed addresses")
)

// classify turns an RPC error into a client error. write says whether the
// request may have changed state (then transport failures after sending
// become ErrOutcomeUnknown).
func classify(err error, write bool) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		if write {
			return fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
		}
		return err
	}
	switch st.Code() {
	case codes.InvalidArgument, codes.ResourceExhausted, codes.OutOfRange:
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	case codes.NotFound:
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case codes.AlreadyExists:
		return fmt.Errorf("%w: %w", ErrAlreadyExists, err)
	case codes.Unknown, codes.DeadlineExceeded, codes.Canceled, codes.Unavailable, codes.Internal,
		codes.Aborted, codes.DataLoss:
		if write {
			return fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
		}
		if st.Code() == codes.Unavailable {
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
	}
	return err
}

// retrySafe reports whether a write may be sent again: the error proves the
// request was not proposed (not leader / no leader, or never sent: see
// markNotSent).
func retrySafe(err error) bool {
	var ns *notSentError
	return errors.As(err, &ns) || wire.NotSent(err)
}

// notSentError is an RPC error from a call that never got a connection to
// put its request on: gRPC failed it while picking one (no connection ready,
// the last attempt to make one failed). The request cannot have reached a
// server.
type notSentError struct{ err error }

func (e *notSentError) Error() string { return e.err.Error() }
func (e *notSentError) Unwrap() error { return e.err }

// GRPCStatus keeps the status of the wrapped error visible to status.Code.
func (e *notSentError) GRPCStatus() *status.Status {
	st, _ := status.FromError(e.err)
	return st
}

// markNotSent is the client's unary interceptor: gRPC reports the peer of a
// call only when the call got a stream on a connection, so an Unavailable
// error without a peer is a call that was never sent. Such errors are safe
// to retry whatever their wording (grpc-go words a failed connection setup
// in many ways: a refused dial, a listener that accepted and died before the
// HTTP/2 preface as a killed node's does, a reset while writing the preface).
func markNotSent(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	var p peer.Peer
	err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Peer(&p))...)
	if err != nil && p.Addr == nil && status.Code(err) == codes.Unavailable {
		return &notSentError{err: err}
	}
	return err
}

// IsOutcomeUnknown reports whether err means a write may or may not have
// been applied.
func IsOutcomeUnknown(err error) bool { return errors.Is(err, ErrOutcomeUnknown) }

func ctxErr(ctx context.Context, last error) error {
	if last != nil {
		return fmt.Errorf("%w (last error: %v)", ctx.Err(), last)
	}
	return ctx.Err()
}

// refused reports whether a server refused the caller's credentials
// (codes.Unauthenticated, codes.PermissionDenied): asking another node or
// asking again will not help, so such an error ends a call at once.
func refused(err error) bool {
	switch status.Code(err) {
	case codes.Unauthenticated, codes.PermissionDenied:
		return true
	}
	return false
}

// transient reports errors worth retrying for a request that is safe to
// repeat (reads, idempotent writes).
func transient(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.Unknown, codes.Aborted, codes.DeadlineExceeded, codes.Internal:
		return true
	}
	return false
}
