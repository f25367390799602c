package commitlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/mmap"
)

// Entry is one verified Raft entry found by a Scanner. Command and Records
// alias the mapping.
type Entry struct {
	Start   int64
	Header  message.FrameHeader
	Command []byte // kind command payload
	Records []byte // the message records, back to back
	End     int64  // Start + Header.EntrySize

	verified bool // records were checked by the scanner
}

// ForEachRecord calls fn with each message record and its absolute offset,
// stopping at the first error. Records of an entry from a Scanner are not
// re-verified; others are decoded with DecodeRecord.
func (e *Entry) ForEachRecord(fn func(off int64, r message.Record) error) error {
	off := e.End - int64(len(e.Records))
	for b := e.Records; len(b) > 0; {
		r, err := e.decode(b)
		if err != nil {
			return fmt.Errorf("commitlog: record at %d: %w", off, err)
		}
		if err := fn(off, r); err != nil {
			return err
		}
		b = b[r.Size:]
		off += int64(r.Size)
	}
	return nil
}

func (e *Entry) decode(b []byte) (message.Record, error) {
	if e.verified {
		return message.DecodeRecordSkipBodyCRC(b)
	}
	return message.DecodeRecord(b)
}

// Scanner walks the entries of a Log from an entry boundary, verifying
// everything: frame fields and CRC32C, each record's structure (magic, every
// length against TOTALSIZE), each record's PHYSICALOFFSET, STORETIMESTAMP
// and STOREHOST against the entry, the record count, increasing Raft indexes
// (and non-decreasing terms), and blanks that reach exactly the end of their
// segment.
//
// The entry's CRC32C covers every byte of every record, BODYCRC and BODY
// included, so a record's body CRC (CRC-32 IEEE) adds no detection of damage
// and is not recomputed: that would read every body twice. What the frame
// CRC cannot catch is bytes that were well-formed when written but are not
// what they claim (an entry at the wrong position, a record of another
// entry), and the structural checks above cover those. CheckBodyCRC turns
// the body CRC back on (offline verification does).
//
// It reads the segments as they are on disk, ignoring the write offset
// (recovery uses it before the write offset is known). Next returns:
//   - io.EOF at a clean end: nothing but zeros from the position on (in this
//     and every later segment), or the end of the last segment;
//   - an error matching ErrTornTail when the entry at Pos is damaged but
//     nothing follows it: no byte beyond its extent (ENTRYSIZE, or the 48-byte
//     frame when the header is unusable) is set in its segment, and no later
//     segment holds data. That is what an interrupted write leaves;
//   - a *CorruptionError (errors.Is ErrCorrupt) otherwise: damage with data
//     after it. Recovery decides (from its checkpoint) whether that data was
//     ever durable; out-of-order page write-back at a power cut can also
//     produce it beyond the last flush;
//   - an error matching ErrRead when a segment could not be read (the file
//     system's I/O error): nothing is known about those bytes.
//
// The checks read a copy of the bytes, taken with pread in chunks of 1 MiB
// where the segment file offers it (see window); the entries returned alias
// the mapping.
//
// Errors are sticky. Pos is then the start of the failing entry, the point to
// truncate at.
//
// Limits: the frame has no header checksum of its own, so a bit flip in
// ENTRYSIZE that makes an entry claim all data after it (up to 8 bytes before
// its segment end) reads as a torn tail; the checkpoint's confirmOffset,
// below which recovery must never truncate, covers that case. Telling a clean
// end from damage reads the rest of the segment and every later segment
// (word-at-a-time zero check, tens of GB/s once the pages are resident),
// skipping what the file system reports as holes (zeroFrom).
type Scanner struct {
	segs []mmap.Segment
	si   int
	pos  int64
	err  error

	lastIndex, lastTerm uint64
	haveLast            bool
	laterZero           int // 0 unknown, 1 yes, 2 no
	bodyCRC             bool
	sparse              bool
	win                 window // the copy the checks read
	scratch             []byte // a sparse record's head and tail, at their offsets
}

// CheckBodyCRC makes the scanner also recompute every record's body CRC.
func (s *Scanner) CheckBodyCRC() { s.bodyCRC = true }

// Sparse makes the scanner skip what only the entry CRC checks, for a range
// whose bytes a checkpoint proved durable (recovery re-indexing below it):
// no entry CRC is computed, and of a record larger than a read chunk only
// its head (up to BODYLENGTH) and its tail (topic and properties) are read.
// Every structural check stays: frame fields, each record's magic and
// lengths, position, timestamp and host, the record count, increasing Raft
// indexes. Damage inside a body or a command payload goes unnoticed (the
// readers check the body CRC where they serve it). After a fill of large
// messages the re-index then reads a few hundred bytes per record instead
// of the whole commitlog above the index's last flush: gigabytes, seconds of
// a restart when they are not in the page cache. Call before the first Next.
func (s *Scanner) Sparse() { s.sparse = true }

// NewScanner starts at from, which must be an entry boundary or a segment
// start of l.
func NewScanner(l *Log, from int64) *Scanner {
	s := &Scanner{segs: l.Segments(), pos: from, win: window{seg: -1}}
	s.si = len(s.segs)
	for i, seg := range s.segs {
		if from >= seg.Start && from <= seg.End() {
			s.si = i
			break
		}
	}
	if len(s.segs) > 0 && s.si == len(s.segs) {
		s.err = fmt.Errorf("%w: scan from %d outside [%d, %d)", ErrOutOfRange, from,
			s.segs[0].Start, s.segs[len(s.segs)-1].End())
	}
	return s
}

// Pos is where the next entry starts (after an error: the failing entry).
func (s *Scanner) Pos() int64 { return s.pos }

// Next returns the next verified entry; see Scanner for the end conditions.
func (s *Scanner) Next() (Entry, error) {
	for s.err == nil {
		if s.si >= len(s.segs) {
			s.err = io.EOF
			break
		}
		seg := s.segs[s.si]
		if s.pos == seg.End() {
			s.nextSegment()
			continue
		}
		b := seg.File.Bytes()[s.pos-seg.Start:] // the mapping: what entries alias, and stop's zero checks
		if len(b) < message.BlankSize {
			s.err = s.stop(seg, b, "entry boundary closer than a blank to the segment end", nil)
			break
		}
		head, err := s.frameHead(seg, len(b))
		if err != nil {
			s.err = err
			break
		}
		switch be.Uint32(head[message.OffMagic:]) {
		case message.MagicBlank:
			if size := int32(be.Uint32(head)); int(size) != len(b) {
				s.err = s.stop(seg, b, fmt.Sprintf("blank of %d bytes, %d to the segment end", size, len(b)), message.ErrBadSize)
				break
			}
			s.pos = seg.End()
		case message.MagicFrame:
			e, reason, err := s.entry(seg, head, b)
			if errors.Is(err, ErrRead) {
				s.err = err
				break
			}
			if err != nil {
				s.err = s.stop(seg, b, reason, err)
				break
			}
			s.pos = e.End
			return e, nil
		default:
			s.err = s.stop(seg, b, fmt.Sprintf("magic %#08x", be.Uint32(head[message.OffMagic:])), message.ErrBadMagic)
		}
	}
	return Entry{}, s.err
}

// frameHead is the copy of the frame at s.pos, or of the rest bytes left in
// its segment if fewer.
func (s *Scanner) frameHead(seg mmap.Segment, rest int) ([]byte, error) {
	n := min(rest, message.FrameSize)
	if s.sparse {
		return s.win.exact(s.si, seg, s.pos, n)
	}
	return s.win.view(s.si, seg, s.pos, n)
}

func (s *Scanner) nextSegment() {
	s.si++
	if s.si < len(s.segs) && s.segs[s.si].Start != s.pos {
		s.err = &CorruptionError{File: s.segs[s.si].File.Name(), Offset: s.pos,
			Reason: fmt.Sprintf("segment starts at %d, previous ends at %d", s.segs[s.si].Start, s.pos)}
	}
}

// entry decodes and verifies the entry at s.pos: head is the copy of its
// frame (or of what is left of the segment, if less), mapped the rest of the
// segment in the mapping. The checks read a copy of the entry (the window);
// the Entry returned aliases the mapping. On failure it returns a reason and
// the decode error, or an error matching ErrRead.
func (s *Scanner) entry(seg mmap.Segment, head, mapped []byte) (Entry, string, error) {
	h, err := message.DecodeFrame(head)
	if err != nil {
		return Entry{}, "frame header", err
	}
	if int64(h.EntrySize)+message.BlankSize > int64(len(mapped)) {
		return Entry{}, fmt.Sprintf("entry of %d bytes with %d left in the segment", h.EntrySize, len(mapped)), message.ErrBadSize
	}
	var recs []byte // the copy of the records (a sparse scan reads them one by one)
	if !s.sparse {
		eb, err := s.win.view(s.si, seg, s.pos, int(h.EntrySize))
		if err != nil {
			return Entry{}, "", err
		}
		if crc := message.EntryCRC(eb); crc != h.CRC {
			return Entry{}, fmt.Sprintf("entry CRC32C %#08x, stored %#08x", crc, h.CRC), message.ErrEntryCRC
		}
		recs = eb[h.Size:]
	}
	if s.haveLast && (h.RaftIndex <= s.lastIndex || h.Term < s.lastTerm) {
		return Entry{}, fmt.Sprintf("raft index %d term %d after index %d term %d",
			h.RaftIndex, h.Term, s.lastIndex, s.lastTerm), message.ErrBadFrame
	}
	if reason, err := s.records(seg, s.pos, h, recs); err != nil {
		return Entry{}, reason, err
	}
	s.lastIndex, s.lastTerm, s.haveLast = h.RaftIndex, h.Term, true
	mb := mapped[:h.EntrySize:h.EntrySize]
	return Entry{Start: s.pos, Header: h, Command: mb[message.FrameSize:h.Size], Records: mb[h.Size:],
		End: s.pos + int64(h.EntrySize), verified: true}, "", nil
}

// records verifies the records of the entry at start (frame h) of seg
// against their positions and the frame: in recs, the copy of its records,
// or (a sparse scan) read one by one.
func (s *Scanner) records(seg mmap.Segment, start int64, h message.FrameHeader, recs []byte) (string, error) {
	var count int32
	var host message.HostPort
	base := start + int64(h.Size)
	off, end := base, start+int64(h.EntrySize)
	for ; off < end; count++ {
		var r message.RecordHead
		var err error
		if s.sparse {
			r, err = s.sparseRecord(seg, off, int(end-off))
		} else {
			b := recs[off-base:]
			r, err = message.CheckRecord(b)
			if err == nil && s.bodyCRC {
				_, err = message.DecodeRecord(b)
			}
		}
		switch {
		case err != nil && errors.Is(err, ErrRead):
			return "", err
		case err != nil:
			return fmt.Sprintf("record %d at %d", count, off), err
		case r.PhysicalOffset != off:
			return fmt.Sprintf("record %d at %d says PHYSICALOFFSET %d", count, off, r.PhysicalOffset), message.ErrBadPosition
		case r.StoreTimestamp != h.StoreTimestamp:
			return fmt.Sprintf("record %d at %d: store timestamp %d, frame %d", count, off, r.StoreTimestamp, h.StoreTimestamp), message.ErrBadFrame
		case count > 0 && r.StoreHost != host:
			return fmt.Sprintf("record %d at %d: store host differs within the entry", count, off), message.ErrBadFrame
		}
		host = r.StoreHost
		off += int64(r.Size)
	}
	if count != h.Count {
		return fmt.Sprintf("%d records, frame says %d", count, h.Count), message.ErrBadFrame
	}
	return "", nil
}

// sparseRecord checks the record at off of seg, of which left bytes remain
// in its entry, for a Sparse scan: a record that fits in a read chunk is
// read whole (the chunk's neighbours are read with it), a larger one only
// at its head and tail. Errors are ErrRead's or the record's decode error.
func (s *Scanner) sparseRecord(seg mmap.Segment, off int64, left int) (message.RecordHead, error) {
	head, err := s.win.exact(s.si, seg, off, min(left, message.OffBody))
	if err != nil {
		return message.RecordHead{}, err
	}
	size := 0 // TOTALSIZE, if the head is whole
	if len(head) == message.OffBody {
		size = int(int32(be.Uint32(head[message.OffTotalSize:])))
	}
	switch {
	case size <= 0 || size > left || size > message.MaxRecordSize:
		// Damaged: the fixed part shows how (CheckRecord bounds TOTALSIZE
		// before it wants the rest), and no scratch of the size it claims.
		b, err := s.win.view(s.si, seg, off, min(left, message.RecordFixedSize))
		if err != nil {
			return message.RecordHead{}, err
		}
		return message.CheckRecord(b)
	case int64(size) <= s.win.chunk():
		b, err := s.win.view(s.si, seg, off, size)
		if err != nil {
			return message.RecordHead{}, err
		}
		return message.CheckRecord(b)
	}
	// The head and the tail at their offsets in scratch; CheckRecord reads
	// nothing between them (see message.CheckRecord).
	if cap(s.scratch) < size {
		s.scratch = make([]byte, size)
	}
	b := s.scratch[:size]
	copy(b, head)
	if tail := message.OffBody + int(int32(be.Uint32(head[message.OffBodyLength:]))); tail >= message.OffBody && tail < size {
		t, err := s.win.exact(s.si, seg, off+int64(tail), size-tail)
		if err != nil {
			return message.RecordHead{}, err
		}
		copy(b[tail:], t)
	}
	return message.CheckRecord(b)
}

// stop classifies a failure at s.pos (b is the rest of the segment): clean
// end, torn tail or corruption.
func (s *Scanner) stop(seg mmap.Segment, b []byte, reason string, cause error) error {
	ext := min(extent(b), len(b))
	if zeroFrom(seg.File, b[ext:], s.pos-seg.Start+int64(ext)) && s.laterSegmentsZero() {
		if isZero(b[:ext]) {
			return io.EOF
		}
		return fmt.Errorf("%w: %s at %d: %s", ErrTornTail, seg.File.Name(), s.pos, reason)
	}
	if cause != nil {
		reason = reason + ": " + cause.Error()
	}
	return &CorruptionError{File: seg.File.Name(), Offset: s.pos, Reason: reason, Err: cause}
}

// extent is how far the entry at the start of b claims to reach: ENTRYSIZE
// when the frame magic is intact and the size plausible, else the frame.
func extent(b []byte) int {
	if len(b) >= message.FrameSize && be.Uint32(b[message.FrameOffMagic:]) == message.MagicFrame {
		if es := int64(int32(be.Uint32(b[message.FrameOffEntrySize:]))); es >= message.FrameSize && es+message.BlankSize <= int64(len(b)) {
			return int(es)
		}
	}
	return message.FrameSize
}

func (s *Scanner) laterSegmentsZero() bool {
	if s.laterZero == 0 {
		s.laterZero = 1
		for _, seg := range s.segs[s.si+1:] {
			if !zeroFrom(seg.File, seg.File.Bytes(), 0) {
				s.laterZero = 2
				break
			}
		}
	}
	return s.laterZero == 1
}

// isZero reports whether b is all zeros, eight words at a time.
func isZero(b []byte) bool {
	le := binary.LittleEndian
	for len(b) >= 64 {
		_ = b[63]
		if le.Uint64(b)|le.Uint64(b[8:])|le.Uint64(b[16:])|le.Uint64(b[24:])|
			le.Uint64(b[32:])|le.Uint64(b[40:])|le.Uint64(b[48:])|le.Uint64(b[56:]) != 0 {
			return false
		}
		b = b[64:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
