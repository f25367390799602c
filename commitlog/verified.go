package commitlog

import (
	"fmt"
	"math"
	"sync"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/mmap"
)

// verified says, per segment, which entries a read may trust without
// recomputing their CRC32C: the prefix of entries reads have verified so
// far, [segment start, prefix), and the entries this process appended,
// [appended, write offset). A record is served only from a trusted entry,
// so a bit flip anywhere in a record (properties, hosts, timestamps, which
// no per-record check covers) is caught by its entry's CRC32C before the
// record is served. Both bounds are entry boundaries.
//
// A read below the prefix end costs a lookup; a read above it verifies the
// entries from the prefix end up to the one holding the record, once per
// process: a consumer reading an old segment pays one CRC32C pass over
// what it reads, and the first read in the middle of a segment pays for
// the entries before it in that segment.
type verified struct {
	mu   sync.Mutex
	segs map[int64]*segTrust // by segment start
}

type segTrust struct {
	prefix   int64 // end of the verified prefix of entries
	appended int64 // start of the entries this process appended (MaxInt64: none)
}

func (v *verified) state(seg mmap.Segment) *segTrust {
	if v.segs == nil {
		v.segs = map[int64]*segTrust{}
	}
	st, ok := v.segs[seg.Start]
	if !ok {
		st = &segTrust{prefix: seg.Start, appended: math.MaxInt64}
		v.segs[seg.Start] = st
	}
	return st
}

// appendedAt records that this process wrote the entry starting at start.
func (v *verified) appendedAt(seg mmap.Segment, start int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if st := v.state(seg); start < st.appended {
		st.appended = start
	}
}

// trusted reports whether [phy, end) lies in trusted entries of seg, and
// else where verification must start (the prefix end).
func (v *verified) trusted(seg mmap.Segment, phy, end int64) (bool, int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	st := v.state(seg)
	return end <= st.prefix || phy >= st.appended, st.prefix
}

// extend moves seg's verified prefix to to (an entry boundary).
func (v *verified) extend(seg mmap.Segment, to int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if st := v.state(seg); to > st.prefix {
		st.prefix = to
	}
}

// truncate forgets what lies at or above off (TruncateDirty) and every
// segment outside [min, off].
func (v *verified) truncate(min, off int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for start, st := range v.segs {
		switch {
		case start < min || start > off:
			delete(v.segs, start)
		case st.prefix > off:
			st.prefix = off
		}
		if st.appended >= off {
			st.appended = math.MaxInt64
		}
	}
}

// forgetBelow drops the state of segments that start below min (retention).
func (v *verified) forgetBelow(min int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for start := range v.segs {
		if start < min {
			delete(v.segs, start)
		}
	}
}

// verifyEntryOf makes sure the entry holding [phy, end) in seg is verified:
// it checks every entry from the verified prefix up to it (frame, size,
// CRC32C) and extends the prefix. A damaged entry is a *CorruptionError
// naming it; the prefix stops before it, so every later read in the
// segment that needs it fails too.
func (l *Log) verifyEntryOf(seg mmap.Segment, phy, end int64) error {
	ok, pos := l.trust.trusted(seg, phy, end)
	if ok {
		return nil
	}
	stop := min(seg.End(), l.q.WriteOffset())
	data := seg.File.Bytes()
	for pos <= phy {
		if pos >= stop {
			return fmt.Errorf("%w: no entry holds %d (written up to %d)", ErrOutOfRange, phy, stop)
		}
		b := data[pos-seg.Start : stop-seg.Start]
		if len(b) >= message.BlankSize && be.Uint32(b[message.OffMagic:]) == message.MagicBlank {
			return readCorruption(seg, pos, fmt.Sprintf("blank before the record at %d", phy), message.ErrBadMagic)
		}
		h, err := message.DecodeFrame(b)
		if err != nil {
			return readCorruption(seg, pos, "entry frame", err)
		}
		if int64(h.EntrySize) > int64(len(b)) {
			return readCorruption(seg, pos, fmt.Sprintf("entry of %d bytes, %d written", h.EntrySize, len(b)), message.ErrBadSize)
		}
		if crc := message.EntryCRC(b[:h.EntrySize]); crc != h.CRC {
			return readCorruption(seg, pos, fmt.Sprintf("entry CRC32C %#08x, stored %#08x", crc, h.CRC), message.ErrEntryCRC)
		}
		pos += int64(h.EntrySize)
		l.trust.extend(seg, pos)
	}
	if end > pos {
		return readCorruption(seg, phy, fmt.Sprintf("record of %d bytes runs past its entry's end %d", end-phy, pos), message.ErrBadSize)
	}
	return nil
}
