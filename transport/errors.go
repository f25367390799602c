package transport

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/wire"
)

// outcomeUnknownMsg is the text of every codes.Unknown write error.
const outcomeUnknownMsg = "outcome unknown: the write may or may not have been applied"

// toStatus maps a backend or store error to a gRPC status error.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	switch store.KindOf(err) {
	case store.KindBadInput:
		return status.Error(codes.InvalidArgument, err.Error())
	case store.KindNotFound:
		return status.Error(codes.NotFound, err.Error())
	case store.KindExists:
		return status.Error(codes.AlreadyExists, err.Error())
	case store.KindLimit:
		return status.Error(codes.ResourceExhausted, err.Error())
	case store.KindLocal:
	}
	switch {
	case errors.Is(err, ErrOutcomeUnknown):
		return status.Error(codes.Unknown, outcomeUnknownMsg+": "+err.Error())
	case errors.Is(err, ErrDiskFull):
		return status.Error(codes.ResourceExhausted, err.Error())
	case errors.Is(err, ErrOverloaded):
		return withReason(status.New(codes.ResourceExhausted, err.Error()), wire.ReasonOverloaded, "")
	case errors.Is(err, ErrNotLeader):
		return notLeaderStatus(wire.ReasonNotLeader, "")
	case errors.Is(err, ErrNoLeader):
		return notLeaderStatus(wire.ReasonNoLeader, "")
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, store.ErrClosed):
		return status.Error(codes.Unavailable, "node is shutting down: "+err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

// notLeaderStatus is the retry-safe Unavailable error with a leader hint.
func notLeaderStatus(reason, leader string) error {
	msg := "no leader elected; retry shortly"
	if reason == wire.ReasonNotLeader {
		msg = "not leader; leader is unknown"
		if leader != "" {
			msg = "not leader; leader is " + leader
		}
	}
	return retrySafeStatus(reason, leader, msg)
}

// retrySafeStatus builds a codes.Unavailable error carrying the ErrorInfo
// that tells clients nothing was proposed.
func retrySafeStatus(reason, leader, msg string) error {
	return withReason(status.New(codes.Unavailable, msg), reason, leader)
}

// withReason attaches the raftmq ErrorInfo (reason, leader hint) to st.
func withReason(st *status.Status, reason, leader string) error {
	info := &errdetails.ErrorInfo{Reason: reason, Domain: wire.ErrorDomain}
	if leader != "" {
		info.Metadata = map[string]string{wire.MetadataLeaderAddr: leader}
	}
	if d, err := st.WithDetails(info); err == nil {
		st = d
	}
	return st.Err()
}

func invalid(format string, args ...any) error {
	return status.Error(codes.InvalidArgument, fmt.Sprintf(format, args...))
}

// msgOf returns the message of a status error (or err's text).
func msgOf(err error) string {
	if st, ok := status.FromError(err); ok {
		return st.Message()
	}
	return err.Error()
}

func statusOf(err error) (*status.Status, bool) { return status.FromError(err) }
