// Package transport is raftmq's client-facing gRPC server.
//
// A Server serves the raftmq.v1.RaftMQ service (proto/raftmq/v1) on top of a
// Backend, the narrow interface the node implements: writes (Send,
// CommitOffsets, topic and membership changes) go through Raft on the
// leader; reads (Pull, queries, offsets, topic descriptions) are answered
// from the node's local store, which holds committed data only. Reads of
// consumer-group offsets (QueryOffset, ListGroups, DescribeGroup) are leader
// reads: only a node that verified its leadership (LeaderReader) answers,
// others forward, so they never read back older than an acknowledged
// commit. Resetting a group is a CommitOffset: a commit may move an offset
// backwards.
//
// Validation. Every request is checked field by field before the backend is
// touched (topic names, queue ids, offsets, batch and body sizes, property
// encoding), so bad input gets codes.InvalidArgument and changes nothing.
//
// Forwarding. When the backend answers a write with ErrNotLeader, the server
// sends the same request to the leader's API address over a cached client
// connection, marking it with the MetadataForwarded header. A forwarded
// request that meets a non-leader fails with codes.Unavailable ("not leader;
// leader is X") instead of hopping again. Errors that prove nothing was
// proposed carry an ErrorInfo (domain "raftmq", reason NOT_LEADER or
// NO_LEADER, metadata "leader"): clients may retry those. A write whose fate
// is unknown (leadership lost after proposing, a broken connection to the
// leader after sending) is codes.Unknown with "outcome unknown: the write may
// or may not have been applied" and must not be blindly retried.
//
// Error codes: bad input InvalidArgument; missing topic or message NotFound;
// existing topic AlreadyExists; no leader or not leader Unavailable; outcome
// unknown Unknown; context DeadlineExceeded or Canceled.
//
// Long poll. Pull at a queue's next offset (status OFFSET_OVERFLOW_ONE) with
// max_wait_ms > 0 waits in store.WaitMessage for at most that long (and the
// request's deadline) and then reads again.
//
// Sizes. The server receives requests of up to MaxRequestBytes (64 MiB)
// and sends answers of up to MaxResponseBytes (65 MiB: the largest Pull
// answer, MaxPullBytes, with its framing); the Go client and the forward to
// the leader use the same limits. A Pull
// returns at most max_bytes of records but always at least one message, so
// a 4 MiB body is returned whatever max_bytes is; a query by key returns at
// most MaxQueryBytes of messages, and at least one.
//
// The server registers gRPC reflection and the standard health service,
// which reports SERVING while the backend knows a leader.
package transport
