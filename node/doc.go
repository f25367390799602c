// Package node wires one raftmq cluster member together and owns its
// lifecycle: the store, the FSM, hashicorp/raft with its log store (raft-wal or raft-boltdb) and the
// linking snapshot store (node/snapstore), the client gRPC API (transport)
// and HTTP.
//
// # Start and stop
//
// New validates the Config, opens the store first (local recovery), then the
// Raft log (OpenRaftStore: raft-wal, or raft-boltdb for a dir that holds it), the snapshot store
// (<dir>/raft/snapshots, retain 2: local snapshots hard-link the store's
// segments, so the store must be on the same file system or its segments
// are copied) and the TCP transport, and starts Raft with
// NoSnapshotRestoreOnStart and, through the raft fork's AppliedOnStart, with
// the store's applied entry as applied: Raft reads no entry the recovered
// store holds again (after kill -9 too, wherever the last snapshot is) and
// gives the FSM only the entries after it. A node without Raft state bootstraps: from --peers
// with --bootstrap, or alone when it has neither peers nor --join (so a bare
// raftmq-node is a working single-node cluster). With --join it asks the
// member at that API address (gRPC Join) to add it, retrying until the
// leader answers that it is a voter (every start: its own configuration,
// old or from a snapshot taken before its removal, is no proof). Close transfers leadership if this node leads, shuts Raft down and
// closes the store (flush, checkpoint, abort file removed). Run waits for ctx
// or a fatal FSM error and then closes. Every goroutine is started through
// Node.goroutine and waited for by Close.
//
// # Writes
//
// Only the leader writes, and only after the Barrier it runs on gaining
// leadership (Serving, /healthz). Send validates every message with
// store.ValidateMessage, then the batcher packs concurrent Sends into one
// MessageBatch entry (GroupCommit bounds) and distributes per-message results.
//
// Bounded entries. No entry holds more than GroupCommit.MaxBytes of
// messages, or one message when that message alone is larger, so that a
// restart reads back no huge entry and AppendEntries stay bounded. A Send
// larger than MaxBytes is split, not refused: its messages are cut in order
// into parts of at most MaxBytes, queued together and proposed as
// consecutive entries (packed with other Sends as usual), and the results
// are returned per message in the order of the request, as for a Send of
// one entry. Splitting was chosen over refusing because nothing promises a
// Send is atomic: results are per message, and a Send whose outcome is
// unknown may already be stored in part. A split Send is not atomic either:
// if its first part fails with a definite error before any other part was
// proposed, that error is returned and nothing was stored; once a later part
// fails (or the caller's deadline passes after a part was proposed) the parts
// not yet proposed are withdrawn and the Send's outcome is unknown. A
// message larger than the store's MaxMessageSize is refused before
// anything is queued, as before.
// A follower answers transport.ErrNotLeader (the server forwards); a
// proposal whose result is not known (leadership lost, shutdown, caller's
// deadline after hand-off) answers transport.ErrOutcomeUnknown.
//
// # Membership
//
// Join on the leader adds the server as a non-voter, waits until the
// server's own applied index (read through its gRPC Status) is within 64
// entries of the leader's last index (bounded by CatchUpTimeout), then
// promotes it with AddVoter. A join that times out leaves a non-voter, and the
// joiner's retry resumes the wait.
//
// # Member API addresses
//
// Raft addresses stay pure. A server's client API address is replicated with
// a SetMemberMeta command the FSM applies to the store's meta (a SetMember
// command frame) and to an in-memory map: the leader announces its own
// after every election, and Join announces the joiner's. The store keeps
// the map across restarts, snapshot headers carry it, it is seeded at start
// from the newest local snapshot too (for stores older than the member
// map), and skipped (replayed) entries still update it, so a restarted
// follower knows where to forward. A member that did not
// join through Join (bootstrapped, or restarted with a new API address)
// announces itself: it sends Join for its own id and Raft address through
// its API server, which forwards it to the leader (announceLoop).
//
// # Observability
//
// HTTP: GET /healthz, GET /status (JSON), GET /metrics (Prometheus, private
// registry, raftmq_ prefix: produce counts/latency/bytes, commitlog offsets
// and flush lag, Raft state and indexes, FSM applied/skipped, recovery time,
// and raftmq_group_lag_messages{group,topic,queue}: each consumer group's lag
// per queue, from store.GroupProgress at scrape time).
package node
