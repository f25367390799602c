package commitlog

import (
	"fmt"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/mmap"
	"github.com/raftmq/raftmq/vfs"
)

// DefaultFileSize is RocketMQ's mappedFileSizeCommitLog (1 GiB).
const DefaultFileSize = 1 << 30

// Config configures a Log.
type Config struct {
	Dir string
	// FileSize of every segment; DefaultFileSize when 0.
	FileSize int64
	// Allocator, if set, prepares the next segments in the background:
	// Preallocate of them ahead of the one in use (0 means 1).
	Allocator   *mmap.Allocator
	Preallocate int
	// PreTouch faults in segments the queue creates itself.
	PreTouch bool
	Logger   hclog.Logger
}

// EntryHeader is what a Raft entry contributes to its frame and records.
type EntryHeader struct {
	Kind           message.Kind
	RaftIndex      uint64
	Term           uint64
	StoreTimestamp int64
	StoreHost      message.HostPort
}

// RecordPos locates one appended message record.
type RecordPos struct {
	Offset int64
	Size   int32
}

// Log is the commitlog: a queue of mapped segments holding framed Raft
// entries. One goroutine may append (AppendEntry, Flush, TruncateDirty,
// DeleteExpired, Close are the writer's); reads (ReadRecord, ReadAt,
// StoreTimestampAt, MinOffset, WriteOffset) may run concurrently with that
// one appender: an entry's bytes are written before the write offset that
// publishes them moves, and reads never look past it. Reads concurrent with
// TruncateDirty, DeleteExpired or Close are the caller's to exclude (the
// returned views alias mappings those calls unmap).
type Log struct {
	q        *mmap.Queue
	fileSize int64
	logger   hclog.Logger
	trust    verified // the entries a read may serve records from

	touched  atomic.Int64 // TouchAhead faulted in the segment bytes below this offset
	touchSum uint64       // what TouchAhead read (zeros); keeps its reads

	encoded []byte // AppendEntry's encoding buffer, reused (the single writer's)
}

// keptEncodeBuffer is the largest encoding buffer AppendEntry keeps for the
// next entry; a larger one is dropped after use.
const keptEncodeBuffer = 4 << 20

// Open opens (creating if needed) the commitlog in cfg.Dir. Like the queue,
// a reopened log reports WriteOffset at the end of its last segment until
// recovery scans it and calls TruncateDirty.
func Open(fs vfs.FS, cfg Config) (*Log, error) {
	if cfg.FileSize == 0 {
		cfg.FileSize = DefaultFileSize
	}
	if cfg.FileSize < 2*(message.FrameSize+message.BlankSize) || cfg.FileSize > 1<<31-1 {
		return nil, fmt.Errorf("commitlog: file size %d out of range", cfg.FileSize)
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	q, err := mmap.OpenQueue(fs, mmap.QueueConfig{
		Dir: cfg.Dir, FileSize: cfg.FileSize, Allocator: cfg.Allocator, Ahead: cfg.Preallocate,
		PreTouch: cfg.PreTouch, Logger: cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("commitlog: open %s: %w", cfg.Dir, err)
	}
	return &Log{q: q, fileSize: cfg.FileSize, logger: cfg.Logger, trust: newVerified()}, nil
}

// TouchAhead faults in the segment bytes the next appends will write: from
// the write offset (or where the last call stopped) up to n bytes past the
// write offset, within the segment that holds it (the next segment joins
// the log only when an append rolls into it). See mmap.Touch: it takes the
// kernel's read-around of fresh pages off the appender. It returns the
// bytes it touched. One caller at a time, concurrent with the appender;
// like a read, not concurrent with TruncateDirty, DeleteExpired or Close.
func (l *Log) TouchAhead(n int64) int64 {
	wo := l.q.WriteOffset()
	seg, ok := l.q.Find(wo)
	if !ok {
		return 0
	}
	from, to := max(wo, l.touched.Load()), min(wo+n, seg.End())
	if from >= to {
		return 0
	}
	l.touchSum += mmap.Touch(seg.File, from-seg.Start, to-seg.Start)
	l.touched.Store(to)
	return to - from
}

// TouchedOffset is where TouchAhead stopped: the segment bytes from the
// write offset up to it are faulted in.
func (l *Log) TouchedOffset() int64 { return l.touched.Load() }

// FileSize is the size of every segment.
func (l *Log) FileSize() int64 { return l.fileSize }

// MinOffset is the start of the oldest segment.
func (l *Log) MinOffset() int64 { return l.q.MinOffset() }

// WriteOffset is the end of the written data.
func (l *Log) WriteOffset() int64 { return l.q.WriteOffset() }

// FlushedOffset is the end of the durable data.
func (l *Log) FlushedOffset() int64 { return l.q.FlushedOffset() }

// Flush makes the log durable up to upTo (clamped to WriteOffset).
func (l *Log) Flush(upTo int64) error { return l.q.Flush(upTo) }

// TruncateDirty cuts the log at off (zeroing the rest of its segment and
// deleting later ones); recovery calls it with the end of the last good entry.
func (l *Log) TruncateDirty(off int64) error {
	err := l.q.TruncateDirty(off)
	l.touched.Store(min(l.touched.Load(), off)) // the zeroed bytes left the page cache
	l.trust.truncate(l.q.MinOffset(), off)
	return err
}

// DeleteExpired deletes up to max oldest segments while keep(seg) is false,
// never the newest; see mmap.Queue.DeleteOldest.
func (l *Log) DeleteExpired(max int, keep func(mmap.Segment) bool) (int, error) {
	n, err := l.q.DeleteOldest(max, keep)
	l.trust.forgetBelow(l.q.MinOffset())
	return n, err
}

// Segments lists the segments oldest first.
func (l *Log) Segments() []mmap.Segment { return l.q.Segments() }

// Close closes every segment.
func (l *Log) Close() error { return l.q.Close() }

// EntrySize is the bytes AppendEntry will write for this entry (frame,
// command and records), without any blank.
func EntrySize(command []byte, msgs []message.Message) int64 {
	n := int64(message.FrameSize + len(command))
	for i := range msgs {
		n += int64(message.MessageSize(&msgs[i]))
	}
	return n
}

// checkEntry validates an entry before anything is written.
func (l *Log) checkEntry(h *EntryHeader, command []byte, msgs []message.Message, queueOffsets []int64) (int64, error) {
	switch {
	case !h.Kind.Valid():
		return 0, fmt.Errorf("%w: kind %d", ErrBadEntry, h.Kind)
	case h.Kind != message.KindCommand && len(command) > 0:
		return 0, fmt.Errorf("%w: command payload in a kind %d entry", ErrBadEntry, h.Kind)
	case h.Kind != message.KindMessages && len(msgs) > 0:
		return 0, fmt.Errorf("%w: messages in a kind %d entry", ErrBadEntry, h.Kind)
	case len(queueOffsets) != len(msgs):
		return 0, fmt.Errorf("%w: %d queue offsets for %d messages", ErrBadEntry, len(queueOffsets), len(msgs))
	case len(command) > message.MaxCommandSize:
		return 0, fmt.Errorf("%w: command of %d bytes", ErrEntryTooLarge, len(command))
	}
	for i := range msgs {
		if err := message.CheckLengths(&msgs[i]); err != nil {
			return 0, fmt.Errorf("message %d: %w", i, err)
		}
	}
	size := EntrySize(command, msgs)
	if size > l.fileSize-message.BlankSize {
		return 0, fmt.Errorf("%w: %d bytes, segment %d", ErrEntryTooLarge, size, l.fileSize)
	}
	return size, nil
}

// AppendEntry writes one Raft entry: its frame, the command payload (kind
// command) and a record per message (kind messages) with the given queue
// offsets. If the entry and a blank do not fit in the current segment, the
// segment is closed with a blank and the entry goes to the next one; an entry
// is never split. It returns the entry's start and appends each record's
// position to out. Nothing is written when the entry is invalid. Messages
// are expected to have passed ValidateMessage; only what the layout cannot
// represent is rechecked.
func (l *Log) AppendEntry(h EntryHeader, command []byte, msgs []message.Message, queueOffsets []int64, out []RecordPos) (int64, []RecordPos, error) {
	size, err := l.checkEntry(&h, command, msgs, queueOffsets)
	if err != nil {
		return 0, out, err
	}
	seg, err := l.segmentFor(size)
	if err != nil {
		return 0, out, err
	}
	start := l.q.WriteOffset()
	// Encoded in memory, then written with one pwrite (mmap.WriteAt):
	// stores into fresh pages of the mapping cost a page fault per 4 KiB.
	if int64(cap(l.encoded)) < size {
		l.encoded = make([]byte, size)
	}
	buf := l.encoded[:size:size]
	n := len(out)
	out = encodeEntry(buf, start, &h, command, msgs, queueOffsets, out)
	err = mmap.WriteAt(seg.File, buf, start-seg.Start)
	if size > keptEncodeBuffer {
		l.encoded = nil
	}
	if err != nil {
		return 0, out[:n], fmt.Errorf("commitlog: append at %d: %w", start, err)
	}
	l.trust.appendedAt(seg, start)
	l.q.SetWriteOffset(start + size)
	return start, out, nil
}

// segmentFor returns the segment the next entry of size bytes goes into,
// writing a blank and rolling when it does not fit in the current one.
func (l *Log) segmentFor(size int64) (mmap.Segment, error) {
	wo := l.q.WriteOffset()
	seg, ok := l.q.Last()
	if !ok || wo >= seg.End() {
		return l.roll()
	}
	if wo < seg.Start {
		return seg, fmt.Errorf("commitlog: write offset %d before the last segment %d", wo, seg.Start)
	}
	left := seg.End() - wo
	if size+message.BlankSize <= left {
		return seg, nil
	}
	if left < message.BlankSize {
		return seg, fmt.Errorf("commitlog: %d bytes left in segment %s, less than a blank", left, seg.File.Name())
	}
	b := seg.File.Bytes()[wo-seg.Start:]
	be.PutUint32(b[message.OffTotalSize:], uint32(left))
	be.PutUint32(b[message.OffMagic:], message.MagicBlank)
	l.q.SetWriteOffset(seg.End())
	return l.roll()
}

func (l *Log) roll() (mmap.Segment, error) {
	seg, err := l.q.Roll()
	if err != nil {
		return seg, fmt.Errorf("commitlog: roll: %w", err)
	}
	if seg.Start != l.q.WriteOffset() {
		return seg, fmt.Errorf("commitlog: rolled to %d, write offset %d", seg.Start, l.q.WriteOffset())
	}
	l.logger.Debug("commitlog: new segment", "start", seg.Start, "file", seg.File.Name())
	return seg, nil
}

// view returns the written bytes from phy to the end of its segment or the
// write offset, whichever comes first.
func (l *Log) view(phy int64) ([]byte, mmap.Segment, error) {
	wo := l.q.WriteOffset()
	if phy < 0 || phy >= wo {
		return nil, mmap.Segment{}, fmt.Errorf("%w: %d not in [min, %d)", ErrOutOfRange, phy, wo)
	}
	seg, ok := l.q.Find(phy)
	if !ok {
		return nil, seg, fmt.Errorf("%w: no segment holds %d", ErrOutOfRange, phy)
	}
	end := min(seg.End(), wo)
	return seg.File.Bytes()[phy-seg.Start : end-seg.Start], seg, nil
}

// ReadAt returns a view of [phy, phy+size), which must be written and lie in
// one segment.
func (l *Log) ReadAt(phy int64, size int32) ([]byte, error) {
	b, _, err := l.view(phy)
	if err != nil {
		return nil, err
	}
	if size < 0 || int(size) > len(b) {
		return nil, fmt.Errorf("%w: %d bytes at %d, %d readable", ErrOutOfRange, size, phy, len(b))
	}
	return b[:size:size], nil
}

// StoreTimestampAt reads the STORETIMESTAMP of the message record at phy
// without decoding the rest (offset-by-time lookups).
func (l *Log) StoreTimestampAt(phy int64) (int64, error) {
	b, _, err := l.view(phy)
	if err != nil {
		return 0, err
	}
	if len(b) < message.RecordFixedSize || be.Uint32(b[message.OffMagic:]) != message.MagicMessageV1 {
		return 0, fmt.Errorf("%w: %d", ErrNotRecord, phy)
	}
	return int64(be.Uint64(b[message.OffStoreTimestamp:])), nil
}
