// Package commitlog is raftmq's commitlog: RocketMQ's message records, byte
// for byte, in fixed-size mapped segments, with every applied Raft entry
// framed so the log can say by itself which Raft index it reflects and
// whether its last entry is complete.
//
// # Layout
//
// message/format.go documents every byte. In short: a segment is a run of entries and
// ends with RocketMQ's BLANK filler. An entry is a 48-byte frame record (own
// magic 0xDAA32FE0, Raft index and term, store timestamp, message count,
// entry size, CRC32C over the whole entry) followed by an optional command
// payload and the entry's message records in RocketMQ's v1 layout (IPv4
// hosts, 91-byte fixed part). Message records keep RocketMQ's meaning: their
// PHYSICALOFFSET is their own absolute offset, STORETIMESTAMP and STOREHOST
// are the entry's (chosen by the leader, so every replica writes the same
// bytes), BODYCRC is CRC-32 IEEE of the body. Consume queues point only at
// message records, so RocketMQ readers never meet a frame.
//
// # Records
//
// The bytes of a record and of a frame, their codec, the property encoding
// and the input rules are package message's (a leaf the Go client shares);
// this package writes and scans them in segments.
//
// # Log
//
// Log wraps an mmap.Queue. AppendEntry encodes an entry in memory (frame,
// payload, records, CRC32C), writes it into the segment with one pwrite
// (mmap.WriteAt: the page cache the mapping shows, without the page fault
// per 4 KiB that stores into fresh pages of a mapping take), then advances
// the write offset,
// which publishes the bytes to concurrent readers (ReadRecord, ReadAt,
// StoreTimestampAt never look past it). ReadRecord and ReadRecordRef serve
// a record only from an entry whose CRC32C was verified in this process or
// that this process appended (verified.go). An entry that does not fit with a
// blank behind it closes the segment with a blank and goes to the next one.
// Nothing here fsyncs on the append path; Flush is the caller's (a flush
// service).
//
// # Scanner
//
// Scanner is what recovery runs: from an entry boundary it verifies every
// entry and record and stops with io.EOF at a clean end, ErrTornTail at an
// interrupted write (nothing set after the damaged entry), or a
// *CorruptionError naming file and offset when valid-looking data follows
// the damage.
package commitlog
