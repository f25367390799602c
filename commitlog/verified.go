package commitlog

import (
	"fmt"
	"math"
	"sort"
	"sync"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/mmap"
)

// How far a read goes to verify the entry holding a record it has no
// verified neighbour for: it walks forward, entry by entry, from the end
// of the nearest verified run below the record when that is at most
// walkLimit away, and else searches backward from the record, at most
// searchLimit bytes, for the frame whose entry holds it. Both bound the
// work one read does under the store's segment lock (retention waits for
// it) to a few milliseconds; an entry longer than searchLimit (larger
// than any group commit makes) falls back to an unbounded walk.
const (
	walkLimit   = 16 << 20
	searchLimit = 16 << 20
)

// verified says, per segment, which entries a read may trust without
// recomputing their CRC32C: runs of whole entries reads have verified, and
// the entries this process appended, [appended, write offset). A record is
// served only from a trusted entry, so a bit flip anywhere in a record
// (properties, hosts, timestamps, which no per-record check covers) is
// caught by its entry's CRC32C before the record is served. A damaged
// entry fails only the reads of its own records.
type verified struct {
	// walk and search bound one read's work (walkLimit, searchLimit unless
	// a test set them).
	walk, search int64

	mu   sync.Mutex
	segs map[int64]*segTrust // by segment start
}

func newVerified() verified { return verified{walk: walkLimit, search: searchLimit} }

type segTrust struct {
	runs     []run // verified entries: sorted, disjoint, not touching
	appended int64 // start of the entries this process appended (MaxInt64: none)
}

// run is [start, end) of whole entries.
type run struct{ start, end int64 }

func (v *verified) state(seg mmap.Segment) *segTrust {
	if v.segs == nil {
		v.segs = map[int64]*segTrust{}
	}
	st, ok := v.segs[seg.Start]
	if !ok {
		st = &segTrust{appended: math.MaxInt64}
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

// trusted reports whether [phy, end) lies in trusted entries of seg; else
// from is the nearest entry boundary known below phy: the end of the run
// below it, or the segment's start.
func (v *verified) trusted(seg mmap.Segment, phy, end int64) (ok bool, from int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	st := v.state(seg)
	if phy >= st.appended {
		return true, 0
	}
	i := sort.Search(len(st.runs), func(i int) bool { return st.runs[i].end > phy })
	if i < len(st.runs) && st.runs[i].start <= phy && end <= st.runs[i].end {
		return true, 0
	}
	from = seg.Start
	if i > 0 {
		from = st.runs[i-1].end
	}
	return false, from
}

// add records [start, end) as verified entries of seg.
func (v *verified) add(seg mmap.Segment, start, end int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	st := v.state(seg)
	runs := append(st.runs, run{start, end})
	sort.Slice(runs, func(i, j int) bool { return runs[i].start < runs[j].start })
	merged := runs[:1]
	for _, r := range runs[1:] {
		if last := &merged[len(merged)-1]; r.start <= last.end {
			last.end = max(last.end, r.end)
			continue
		}
		merged = append(merged, r)
	}
	st.runs = merged
}

// truncate forgets what lies at or above off (TruncateDirty) and every
// segment outside [min, off].
func (v *verified) truncate(min, off int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for start, st := range v.segs {
		if start < min || start > off {
			delete(v.segs, start)
			continue
		}
		kept := st.runs[:0]
		for _, r := range st.runs {
			if r.end <= off {
				kept = append(kept, r)
			}
		}
		st.runs = kept
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

// verifyEntryOf makes sure the entry holding [phy, end) in seg is verified
// (its frame decodes, it holds the record, its CRC32C matches) and records
// it. A damaged entry is a *CorruptionError naming it.
func (l *Log) verifyEntryOf(seg mmap.Segment, phy, end int64) error {
	ok, from := l.trust.trusted(seg, phy, end)
	if ok {
		return nil
	}
	stop := min(seg.End(), l.q.WriteOffset())
	var walkErr error
	if phy-from <= l.trust.walk {
		if walkErr = l.walk(seg, from, phy, end, stop); walkErr == nil {
			return nil
		}
	}
	if l.search(seg, from, phy, end, stop) {
		return nil
	}
	if walkErr != nil {
		return walkErr // a damaged entry before the record, and the record's own not found intact
	}
	return l.walk(seg, from, phy, end, stop) // an entry longer than the search reaches
}

// walk verifies the entries from the boundary from until the one holding
// [phy, end), and records those that verified.
func (l *Log) walk(seg mmap.Segment, from, phy, end, stop int64) error {
	data := seg.File.Bytes()
	pos := from
	defer func() {
		if pos > from {
			l.trust.add(seg, from, pos)
		}
	}()
	for pos <= phy {
		if pos >= stop {
			return fmt.Errorf("%w: no entry holds %d (written up to %d)", ErrOutOfRange, phy, stop)
		}
		b := data[pos-seg.Start : stop-seg.Start]
		if len(b) >= message.BlankSize && be.Uint32(b[message.OffMagic:]) == message.MagicBlank {
			return readCorruption(seg, pos, fmt.Sprintf("blank before the record at %d", phy), message.ErrBadMagic)
		}
		size, reason, err := verifyEntryAt(b)
		if err != nil {
			return readCorruption(seg, pos, reason, err)
		}
		pos += size
	}
	if end > pos {
		return readCorruption(seg, phy, fmt.Sprintf("record of %d bytes runs past its entry's end %d", end-phy, pos), message.ErrBadSize)
	}
	return nil
}

// search looks backward from phy (no further than from, nor searchLimit)
// for an entry frame whose entry holds [phy, end) and verifies; it records
// the entry and reports whether it found one.
func (l *Log) search(seg mmap.Segment, from, phy, end, stop int64) bool {
	data := seg.File.Bytes()
	lowest := max(from, phy-l.trust.search, seg.Start)
	for p := phy - message.FrameSize; p >= lowest; p-- {
		b := data[p-seg.Start : stop-seg.Start]
		if be.Uint32(b[message.OffMagic:]) != message.MagicFrame {
			continue
		}
		if size, _, err := verifyEntryAt(b); err == nil && p+size >= end {
			l.trust.add(seg, p, p+size)
			return true
		}
	}
	return false
}

// verifyEntryAt decodes the frame at the start of b and verifies its entry's
// CRC32C; it returns the entry's size, or why it does not check.
func verifyEntryAt(b []byte) (int64, string, error) {
	h, err := message.DecodeFrame(b)
	if err != nil {
		return 0, "entry frame", err
	}
	if int64(h.EntrySize) > int64(len(b)) {
		return 0, fmt.Sprintf("entry of %d bytes, %d written", h.EntrySize, len(b)), message.ErrBadSize
	}
	if crc := message.EntryCRC(b[:h.EntrySize]); crc != h.CRC {
		return 0, fmt.Sprintf("entry CRC32C %#08x, stored %#08x", crc, h.CRC), message.ErrEntryCRC
	}
	return int64(h.EntrySize), "", nil
}
