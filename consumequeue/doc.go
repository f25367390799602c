// Package consumequeue implements RocketMQ's consume queues: per (topic,
// queue id), an array of 20-byte units (commitlog offset, size, tagsCode)
// indexed by queue offset, so that a consumer at queue offset N finds its
// message in the commitlog with one read. The layout is RocketMQ's byte for
// byte (see format.go).
//
// # Files
//
// A queue is a mmap.Queue of equal-size files (default 6,000,000 bytes =
// 300,000 units) in <Dir>/<topic>/<queueId>/, named by the 20-digit byte
// offset of their first unit. Queue offset N is at byte N*20. A queue that
// starts at a non-zero offset (after retention, or from a snapshot) starts
// its first file at the file boundary below that offset and fills the
// earlier units with RocketMQ's filler (0, MaxInt32, 0); MinOffset skips them.
//
// # Writing: Put is idempotent and never leaves a hole
//
// The store dispatches every message to its queue with Put(queueOffset,
// unit). Re-dispatch after recovery or Raft replay is harmless: a unit that
// ends at or below MaxPhyOffset, or whose queue offset is below MaxOffset,
// is skipped. Unlike RocketMQ (which logs "[BUG]logic queue order maybe
// wrong" and appends at the wrong position, issues #467, #1397, #7355), a
// queue offset above MaxOffset is refused with ErrGap and nothing is written.
// A unit that starts before the previous one ends is refused (ErrBadUnit):
// units are ordered by commitlog offset, which the binary searches rely on.
//
// # Recovery and truncation
//
// Open loads every queue and recovers it as Recover, RocketMQ's
// ConsumeQueue.recover, does: scan from the third-last file (or, with
// Config.Durable, from after the queue's last durable unit when that is
// later, so a restart reads only what a checkpoint does not cover); the
// first unit that is not valid (size <= 0,
// negative offset, an all-zero unit, a filler after a real unit, a unit
// starting before the previous one ends) ends the queue, and everything after
// it is cut and zeroed (RocketMQ leaves stale bytes behind). The result is
// always a prefix of valid units, whatever the files hold.
//
// TruncateAtPhy(phy) removes every unit whose commitlog offset is >= phy (the
// store calls it with its confirm offset after abnormal recovery, before
// re-dispatching). DeleteBelowPhy(minPhy) follows commitlog retention:
// non-last files whose last unit ends below minPhy are deleted and MinOffset
// moves to the first unit at or above minPhy.
//
// # Reading
//
// Get and Range read units in [MinOffset, MaxOffset); OffsetByTime finds an
// offset by store time with RocketMQ's LOWER/UPPER semantics, by binary
// search over the units with a caller-supplied store-time lookup.
//
// # Concurrency and durability
//
// Each Queue has one writer (the store's dispatch) and any number of readers.
// Nothing is flushed on the write path: Flush (per queue or for the Store)
// makes written units durable, and FlushedOffset tells how far that goes.
// Nothing here starts a goroutine or reads the clock.
package consumequeue
