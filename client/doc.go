// Package client is the Go client of raftmq.
//
// New connects through any seed address, asks for the leader (Status) and
// sends writes there; reads go to the leader too unless Options.ReadFromAny.
//
// Retries. A write is sent again only when the error proves it was not
// proposed: the server answered "not leader" / "no leader" (an ErrorInfo of
// domain "raftmq"), or the connection was refused while dialing. The client
// then re-resolves the leader (using the hint in the error) and tries again
// with jittered backoff until Options.RetryTimeout (default 30 s) has passed
// or the call's context ends: the budget is time, not a count of tries,
// because an election lasts as long as it lasts. A write whose fate is
// unknown —
// codes.Unknown "outcome unknown", a deadline or a broken connection after
// sending — is returned as ErrOutcomeUnknown and never retried blindly,
// because a Send is not idempotent. CommitOffset is idempotent and is
// retried after transient errors. Reads are always retried on another node.
//
// Messages. NewMessage builds a message; the client gives every message a
// unique RocketMQ-style id (UNIQ_KEY, 32 hex characters) unless it has one,
// and WithKeys/WithTag set the KEYS and TAGS properties the store indexes
// and filters on. Send stores a batch in one Raft entry. A Producer batches
// SendAsync calls (MaxBatch, Linger) with up to MaxInFlight Sends at once.
//
// Errors wrap ErrOutcomeUnknown, ErrUnavailable, ErrInvalid, ErrNotFound or
// ErrAlreadyExists together with the gRPC status error.
package client
