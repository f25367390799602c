// Package recovery brings a store back after it stopped: from the
// checkpoint, the abort file and the commitlog alone it computes a Plan,
// then rebuilds the derived state (consume queues, index, metadata) from
// the verified commitlog through Replay. The store owns that state and
// hands it over as a Target; it opens the files, calls the steps in order
// (CutToCheckpoint, RebuildAll or Reindex, RepairLagging, Tail), cuts the
// commitlog at the confirm offset and writes the checkpoint.
//
// # Contract
//
//   - The checkpoint (Checkpoint, WriteCheckpoint, ReadCheckpoint) says
//     which prefix of the store is durable and consistent: the end of the
//     last complete entry, its Raft index and term, the commitlog minimum,
//     the store's meta and the index state of the last index flush. It is
//     replaced atomically and carries a CRC32C; a damaged one is
//     ErrCheckpointCorrupt and the store refuses to open.
//   - The abort file exists while a store is open: present at open means
//     the last run did not close cleanly (Abnormal), absent means Normal.
//   - Begin checks what the checkpoint claims against the commitlog (the
//     checkpoint's own entry is re-verified) and fixes where the scan
//     starts; ScanTail then verifies every entry after it (frame, CRCs,
//     Raft index order) and ends at the first torn or corrupt one, which
//     sets the confirm offset. Everything handed to the caller lies below
//     that final confirm offset. A checkpoint whose own entry does not
//     verify is an Error naming the file and offset: recovery never guesses
//     below a checkpoint it cannot confirm.
//   - Derived state is trusted only up to the checkpoint: CutToCheckpoint
//     cuts consume queues and index back to it and returns the metadata it
//     saved. A Replay then applies verified entries only (command frames to
//     the metadata, message records to consume queues, index and queue
//     table); puts are idempotent, so replaying what the files already hold
//     changes nothing. Reindex, whose range lies below the checkpoint (the
//     commitlog there was synced before the checkpoint was written), scans
//     sparsely: every structural check, but no entry CRC and no body of a
//     record larger than a read chunk (commitlog.Scanner.Sparse).
//     Verification and dispatch run as a two-stage
//     pipeline on one goroutine each; the scanning goroutine has always
//     finished when a Replay method returns.
//
// The checkpoint layout is documented next to its code (checkpoint.go) and
// in the repository's FORMAT.md.
package recovery
