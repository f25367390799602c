// Package recovery decides how a store comes back after it stopped: from
// the checkpoint, the abort file and the commitlog alone it computes a Plan
// and changes nothing; package store carries the plan out.
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
//
// The checkpoint layout is documented next to its code (checkpoint.go) and
// in the repository's FORMAT.md.
package recovery
