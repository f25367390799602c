// Package index implements RocketMQ's message index: hash-indexed files that
// map "topic#key" (each KEYS token and the UNIQ_KEY of a message) to the
// commitlog offsets of the messages carrying it, for query by key and time
// range. The file layout is RocketMQ's IndexFile byte for byte (format.go):
// a 40-byte header, a table of hash slots and an array of 20-byte entries,
// each slot heading a newest-first chain of entries linked by prevIndex.
//
// # Files
//
// Files live in one directory and are named by a store timestamp formatted
// yyyyMMddHHmmssSSS in UTC: the store time of the message whose key opened
// the file, or the millisecond after the previous file's name if that one is
// not later. The name therefore follows from the data (replicas that apply
// the same log create the same names), never from the local clock. A file
// holds MaxIndexes-1 entries (entry 0 is reserved) and is 420,000,040 bytes
// with the defaults; it is mapped, and sparse on disk until written.
//
// # Writing
//
// PutMessage adds one entry per key. It is idempotent: a message at or below
// the newest file's endPhyOffset is skipped, so re-dispatch after recovery or
// replay does not index a message twice.
//
// # Reading
//
// Query walks the files newest first and, in each, the chain of the key's
// slot, collecting offsets whose hash matches and whose time (second
// precision) lies in the range. Candidates are hash matches only: the caller
// reads the messages and keeps those whose key really matches. Chains read
// from disk are never trusted: a walk stops at an out-of-range or
// non-decreasing prevIndex, so it is bounded by the file's entry count.
// The first query that reaches a file this process did not create checks
// its slots and chains as a whole (check.go) and fails with ErrCorrupt
// when they do not agree, instead of answering without the keys a damaged
// slot or entry would hide.
//
// # Truncation and retention
//
// TruncateAbove(phy) removes exactly the entries with phyOffset >= phy: the
// files that begin at or after phy are deleted and the file that straddles
// phy pops entries from its end, undoing each put (slot back to prevIndex,
// counts and end fields restored). The result is byte for byte the file a
// fresh build of only the kept messages gives, so the store can cut the index
// at its confirm offset after a crash and re-dispatch, instead of deleting
// the whole current file as RocketMQ does (issues #3868, #8007).
// Config.StoreTime lets it restore the exact endTimestamp. DeleteBelow(minPhy)
// follows commitlog retention, deleting non-last files that end below it.
//
// Nothing is flushed on the write path; Flush writes entries, then headers
// and slots. Nothing here starts a goroutine or reads the clock.
package index
