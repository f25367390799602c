package wire

import (
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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
