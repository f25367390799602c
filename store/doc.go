// Package store is raftmq's message store: RocketMQ's broker store (a
// commitlog of mmap'd segments, a consume queue per topic and queue, a hash
// index, a checkpoint and an abort file) driven by Raft entries instead of
// by producers. It is the engine below the FSM; the layers under it are
// recovery, consumequeue, index, commitlog, meta, mmap and vfs.
//
// # Contract
//
//   - Writes are entries. AppendMessages, CreateTopic, DeleteTopic,
//     UpdateTopic, CommitOffsets and MarkApplied each apply one Raft entry,
//     identified by its EntryHeader (index, term, store timestamp), in Raft
//     order, one at a time. The same entries applied to the same state give
//     byte-identical commitlogs on every replica. An entry at or below the
//     applied index is refused with ErrAlreadyApplied.
//   - Errors say who is at fault (KindOf): a refusal of the request
//     (KindBadInput, KindNotFound, KindExists) is deterministic, the same
//     on every replica, and leaves the store unchanged; anything else
//     (KindLocal: I/O, a closed store) is this node's. A failed sync or
//     entry write fails the store closed (ErrFailedClosed): no further
//     write or checkpoint until it is reopened, so recovery starts from
//     what is really on disk.
//   - Reads (Reader) serve only applied entries and never a record that
//     fails its read checks. They may run concurrently with writes.
//   - Durability is Raft's: the store flushes in the background (commitlog,
//     consume queues and checkpoint every FlushInterval or once FlushBytes
//     of commitlog wait, the index every IndexFlushInterval or when idle) and never on
//     the write path. The same goroutine can fault in the commitlog pages
//     ahead of the write offset (TouchAhead, off by default). Open recovers to the
//     last complete, verified entry (normal recovery after Close, abnormal
//     after a crash: the abort file is still there) and reports the applied
//     index, from which Raft replays the rest.
//   - Snapshots are O(metadata): CaptureSnapshot names the segments below
//     the confirm offset, and InstallSnapshot builds a new store from a
//     snapshot stream, swapping directories so a crash leaves the old or
//     the new store, never a mix.
//   - Idempotent sends (dedup.go): a message whose PSEQ sequence its
//     producer stored before is answered with the first copy's result and
//     not written; one below the producer's window is refused
//     (ErrSeqTooOld). The producer table is meta, rebuilt from records.
//   - Delayed delivery (timer.go): a message with a delay property waits
//     in ScheduleTopic until a DeliverDue entry copies it into its topic;
//     the progress is meta, rebuilt from the delivered copies' marks.
//   - Retention deletes whole commitlog segments below the last checkpoint,
//     oldest first, never the last one, by age or when the disk is too full
//     (vfs.FS.Space), then the consume-queue and index files that only point
//     below the new minimum. Segments holding pending scheduled messages
//     stay.
//
// Every on-disk byte is documented in the repository's FORMAT.md.
package store
