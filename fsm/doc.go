// Package fsm is the Raft state machine of raftmq: a raft.BatchingFSM that
// decodes each committed log entry into a Command and applies it to the
// store.
//
// # Entries
//
// A LogCommand entry holds one Command (command.go, layout in format.go):
// a MessageBatch produced by the leader's group commit, consumer offsets,
// a topic change, or SetMemberMeta (a server's client API address). Decoding
// never panics and is bounded by the entry's size.
//
// # Determinism
//
// Every byte the store writes comes from the entry: the store timestamp is
// max(leader timestamp, last store timestamp) and the store host is the
// leader's. A malformed command or a deterministic store refusal (bad topic,
// topic exists, ...) is recorded with store.MarkApplied and answered with an
// error, so every replica advances its applied index identically. A write
// refused for lack of space (WaitsForSpace: ENOSPC, but not from a failed
// sync) is waited out: the FSM reopens the store (recovery from disk cuts
// whatever part of the entry was written), runs a retention pass and
// applies the entry again, with pauses from Config.SpaceRetry doubling to
// 32 times that, until it fits or Config.Done closes. An entry the
// reopened store already holds (its messages were written, their dispatch
// to the consume queues was refused) keeps the first try's results; a
// reopened store that lost entries it had applied is fatal. Any other
// store error (I/O, closed, a failed sync) is fatal: the FSM stops applying
// and calls Config.OnFatal; the refused entries replay from the Raft log
// after restart.
//
// # Replay
//
// The node runs Raft with NoSnapshotRestoreOnStart: the store recovers its own
// files first, then Raft re-delivers entries after its newest snapshot. The
// FSM skips, one by one, every entry with Index <= store.Applied() and still
// answers each (Stats counts applied vs skipped entries).
//
// # Snapshots
//
// Snapshot() is O(1): store.CaptureSnapshot on the FSM goroutine. Persist
// first calls store.FlushTo(confirmOffset) so the store is durable up to the
// snapshot before Raft may compact its log (NATS #8425), then streams a header
// and every commitlog segment below confirmOffset with a CRC each (format.go).
// Restore reads that stream, verifies it and lets store.InstallSnapshot swap
// the files in, then reopens the store. The member-address map travels in
// the snapshot header too.
package fsm
