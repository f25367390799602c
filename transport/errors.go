package transport

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/store"
)

// ErrorInfo reasons (domain ErrorDomain) attached to errors that the server
// produced before anything was proposed: a client may retry NOT_LEADER and
// NO_LEADER (codes.Unavailable) on the leader named in the "leader" metadata
// key, and OVERLOADED (codes.ResourceExhausted) on the same leader after a
// backoff.
const (
	ErrorDomain        = "raftmq"
	ReasonNotLeader    = "NOT_LEADER"
	ReasonNoLeader     = "NO_LEADER"
	ReasonOverloaded   = "OVERLOADED"
	MetadataLeaderAddr = "leader"
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
		return withReason(status.New(codes.ResourceExhausted, err.Error()), ReasonOverloaded, "")
	case errors.Is(err, ErrNotLeader):
		return notLeaderStatus(ReasonNotLeader, "")
	case errors.Is(err, ErrNoLeader):
		return notLeaderStatus(ReasonNoLeader, "")
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
	if reason == ReasonNotLeader {
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
	info := &errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain}
	if leader != "" {
		info.Metadata = map[string]string{MetadataLeaderAddr: leader}
	}
	if d, err := st.WithDetails(info); err == nil {
		st = d
	}
	return st.Err()
}

// RetryReason returns the ErrorInfo reason of a retry-safe raftmq error
// (ReasonNotLeader, ReasonNoLeader or ReasonOverloaded) and the leader hint,
// or "" if err is not one.
func RetryReason(err error) (reason, leader string) {
	st, ok := status.FromError(err)
	if !ok {
		return "", ""
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == ErrorDomain {
			return info.GetReason(), info.GetMetadata()[MetadataLeaderAddr]
		}
	}
	return "", ""
}

// NotSent reports whether err proves the request never reached a server
// handler: a retry-safe raftmq error, or a gRPC failure to set up the
// connection (notSentPhrases), such as a refused dial or a listener that
// accepted and then died before the HTTP/2 preface (a node being killed).
func NotSent(err error) bool {
	if r, _ := RetryReason(err); r != "" {
		return true
	}
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable {
		return false
	}
	m := st.Message()
	for _, phrase := range notSentPhrases {
		if strings.Contains(m, phrase) {
			return true
		}
	}
	return false
}

// notSentPhrases are grpc-go's words for failures while a connection is
// set up (dialing, the HTTP/2 prefaces and first settings frames). grpc-go
// gives a connection RPCs only once that is done, so an RPC failing with
// one of them was never sent.
var notSentPhrases = []string{
	"while dialing", "connection refused", "produced zero addresses",
	"client preface", "server preface", "initial settings frame", "not a settings frame",
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
