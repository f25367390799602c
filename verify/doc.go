// Package verify checks stores offline: the consistency of each store
// directory and, across replicas, that their commitlogs are byte-identical.
// It backs `raftmq verify` and the tests that stop a cluster and compare its
// replicas.
//
// # Contract
//
//   - Nothing is modified. The commitlog is opened through a file system
//     that refuses every mutation; each consume queue is checked on a
//     private in-memory copy (opening a consume queue runs its recovery,
//     which may zero a tail).
//   - Per store directory (a node data dir holding store/, or a store dir
//     itself) Stores verifies every commitlog entry from the oldest segment
//     on: damage at or above the checkpoint is a warning (recovery cuts it
//     and Raft replays it), below it an error. It checks that the
//     checkpoint and its entry are intact, that every consume-queue unit
//     points at a message record with its topic, queue, queue offset, size
//     and tagsCode, and that queue offsets in the commitlog are contiguous.
//   - Across directories it compares the commitlog bytes of the common
//     range [max(min offsets), min(confirm offsets)).
//   - The report goes to a writer, one line per finding and one summary
//     line per store; the error wraps ErrFailed when any check failed.
//
// It reads the store's files through the packages that own them
// (commitlog, consumequeue, recovery, meta) and never imports the store.
package verify
