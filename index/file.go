package index

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync/atomic"

	"github.com/raftmq/raftmq/mmap"
)

// layout locates slots and entries in a file's bytes.
type layout struct {
	slots, indexes int
}

func (l layout) size() int64        { return FileSize(l.slots, l.indexes) }
func (l layout) slotPos(s int) int  { return HeaderSize + s*SlotSize }
func (l layout) entriesStart() int  { return HeaderSize + l.slots*SlotSize }
func (l layout) entryPos(n int) int { return l.entriesStart() + n*EntrySize }

// readSlot returns slot s of b, or 0 if b is too short.
func (l layout) readSlot(b []byte, s int) int32 {
	p := l.slotPos(s)
	if s < 0 || s >= l.slots || p+SlotSize > len(b) {
		return 0
	}
	return int32(binary.BigEndian.Uint32(b[p:]))
}

func (l layout) writeSlot(b []byte, s int, v int32) {
	binary.BigEndian.PutUint32(b[l.slotPos(s):], uint32(v))
}

// readEntry returns entry n of b; ok is false if it lies outside b.
func (l layout) readEntry(b []byte, n int) (Entry, bool) {
	p := l.entryPos(n)
	if n < 0 || n >= l.indexes || p+EntrySize > len(b) {
		return Entry{}, false
	}
	e, _ := DecodeEntry(b[p:])
	return e, true
}

// entryLimit is the number of entry positions a header may reference:
// IndexCount clamped to the file's capacity.
func (l layout) entryLimit(h Header) int {
	return int(min(max(h.IndexCount, 0), int32(min(l.indexes, math.MaxInt32))))
}

// selectPhyOffsets appends to dst (until it holds maxNum) the phy offsets of
// the entries of b's chain for hash whose time lies in [begin, end], newest
// first, as RocketMQ's IndexFile.selectPhyOffset. It never panics and is
// bounded: every step must go to a strictly smaller entry number.
func (l layout) selectPhyOffsets(b []byte, h Header, hash int32, maxNum int, begin, end int64, dst []int64) []int64 {
	limit := l.entryLimit(h)
	n := int(l.readSlot(b, slotOf(hash, l.slots)))
	for n > 0 && n < limit && len(dst) < maxNum {
		e, ok := l.readEntry(b, n)
		if !ok || e.TimeDiff < 0 {
			break
		}
		t := h.BeginTimestamp + int64(e.TimeDiff)*1000
		if e.KeyHash == hash && t >= begin && t <= end {
			dst = append(dst, e.PhyOffset)
		}
		if t < begin || int(e.PrevIndex) >= n {
			break
		}
		n = int(e.PrevIndex)
	}
	return dst
}

// file is one open index file.
type file struct {
	name   string
	nameTS int64
	path   string
	mf     mmap.File
	// headerErr: the newest file's header failed checkHeader at open. Its
	// header may be torn by a crash (it is only trusted up to the
	// checkpoint); RecoverTo rewrites or removes the file and clears this,
	// and TruncateAbove refuses to go on while it is set.
	headerErr error
	lay       layout
	hdr       Header
	// checked: a query may trust the file's slots and entries (check
	// passed in this process, or this process created the file); damage:
	// check failed (every later query that reads the file fails alike).
	checked atomic.Bool
	damage  atomic.Pointer[error]
	// unmapped: the mapping is closed (Service.mapped).
	unmapped bool

	// dirty tracking for Flush: the header and slot area, and the range of
	// entry numbers [dirtyLo, dirtyHi) written or cleared since the last one.
	metaDirty        bool
	dirtyLo, dirtyHi int
}

func (f *file) bytes() []byte { return f.mf.Bytes() }

func (f *file) hasEntries() bool { return f.hdr.IndexCount > 1 }

func (f *file) full() bool { return int(f.hdr.IndexCount) >= f.lay.indexes }

// checkHeader normalises and validates a header read from disk.
func (f *file) checkHeader() error {
	if f.hdr.IndexCount <= 0 { // a file created but never written: as RocketMQ
		f.hdr.IndexCount = 1
	}
	if int(f.hdr.IndexCount) > f.lay.indexes {
		return fmt.Errorf("%w: %s: indexCount %d > %d", ErrCorrupt, f.path, f.hdr.IndexCount, f.lay.indexes)
	}
	if f.hdr.HashSlotCount < 0 || int(f.hdr.HashSlotCount) > f.lay.slots || f.hdr.HashSlotCount >= f.hdr.IndexCount {
		return fmt.Errorf("%w: %s: hashSlotCount %d (indexCount %d)", ErrCorrupt, f.path, f.hdr.HashSlotCount, f.hdr.IndexCount)
	}
	return nil
}

func (f *file) writeHeader() {
	f.hdr.Encode(f.bytes())
	f.metaDirty = true
}

func (f *file) markEntry(n int) {
	if f.dirtyLo == f.dirtyHi {
		f.dirtyLo, f.dirtyHi = n, n+1
		return
	}
	f.dirtyLo, f.dirtyHi = min(f.dirtyLo, n), max(f.dirtyHi, n+1)
}

// timeDiff is RocketMQ's (ts-begin)/1000 clamped to [0, MaxInt32], 0 while
// the begin timestamp is unset.
func timeDiff(begin, ts int64) int32 {
	if begin <= 0 {
		return 0
	}
	d := (ts - begin) / 1000
	return int32(min(max(d, 0), math.MaxInt32))
}

// put adds one entry (the file must not be full), as IndexFile.putKey.
func (f *file) put(hash int32, phy, ts int64) {
	b := f.bytes()
	n := f.hdr.IndexCount
	s := slotOf(hash, f.lay.slots)
	prev := f.lay.readSlot(b, s)
	if prev <= 0 || prev >= n {
		prev = 0
	}
	e := Entry{KeyHash: hash, PhyOffset: phy, TimeDiff: timeDiff(f.hdr.BeginTimestamp, ts), PrevIndex: prev}
	e.Encode(b[f.lay.entryPos(int(n)):])
	f.markEntry(int(n))
	f.lay.writeSlot(b, s, n)
	if n <= 1 {
		f.hdr.BeginPhyOffset, f.hdr.BeginTimestamp = phy, ts
	}
	if prev == 0 {
		f.hdr.HashSlotCount++
	}
	f.hdr.IndexCount++
	f.hdr.EndPhyOffset, f.hdr.EndTimestamp = phy, ts
	f.writeHeader()
}

// popFrom removes entries from the end while their phyOffset >= phy, undoing
// put exactly (slot back to prevIndex, entry zeroed, counts decremented). It
// reports whether it removed anything.
func (f *file) popFrom(phy int64) (bool, error) {
	b := f.bytes()
	popped := false
	for f.hdr.IndexCount > 1 {
		n := f.hdr.IndexCount - 1
		e, ok := f.lay.readEntry(b, int(n))
		if !ok || e.PhyOffset < phy {
			break
		}
		s := slotOf(e.KeyHash, f.lay.slots)
		if f.lay.readSlot(b, s) != n {
			return popped, fmt.Errorf("%w: %s: entry %d is not the head of slot %d", ErrCorrupt, f.path, n, s)
		}
		prev := e.PrevIndex
		if prev <= 0 || prev >= n {
			prev = 0
			f.hdr.HashSlotCount--
		}
		f.lay.writeSlot(b, s, prev)
		clear(b[f.lay.entryPos(int(n)) : f.lay.entryPos(int(n))+EntrySize])
		f.markEntry(int(n))
		f.hdr.IndexCount--
		popped = true
	}
	return popped, nil
}

// setEnd restores the end fields after popFrom from the new last entry.
func (f *file) setEnd(storeTime func(int64) (int64, error)) error {
	e, _ := f.lay.readEntry(f.bytes(), int(f.hdr.IndexCount-1))
	f.hdr.EndPhyOffset = e.PhyOffset
	switch {
	case f.hdr.IndexCount == 2:
		f.hdr.EndTimestamp = f.hdr.BeginTimestamp
	case storeTime != nil:
		ts, err := storeTime(e.PhyOffset)
		if err != nil {
			return fmt.Errorf("index: store time of %d: %w", e.PhyOffset, err)
		}
		f.hdr.EndTimestamp = ts
	default:
		f.hdr.EndTimestamp = f.hdr.BeginTimestamp + int64(e.TimeDiff)*1000
	}
	f.writeHeader()
	return nil
}

// timeMatched is RocketMQ's IndexFile.isTimeMatched: [begin, end] overlaps
// the file's time range.
func (f *file) timeMatched(begin, end int64) bool {
	h := f.hdr
	return (begin < h.BeginTimestamp && end > h.EndTimestamp) ||
		(begin >= h.BeginTimestamp && begin <= h.EndTimestamp) ||
		(end >= h.BeginTimestamp && end <= h.EndTimestamp)
}

// flush makes the dirty entries, then the header and slots, durable.
// flushRange is what one Flush must msync of one file: the header and slot
// area (meta) or the entries [lo, hi).
type flushRange struct {
	f      *file
	meta   bool
	lo, hi int
}

// takeDirty appends what was written since the last takeDirty to out and
// clears the marks (s.mu held).
func (f *file) takeDirty(out []flushRange) []flushRange {
	if f.dirtyLo < f.dirtyHi {
		out = append(out, flushRange{f: f, lo: f.dirtyLo, hi: f.dirtyHi})
		f.dirtyLo, f.dirtyHi = 0, 0
	}
	if f.metaDirty {
		out = append(out, flushRange{f: f, meta: true})
		f.metaDirty = false
	}
	return out
}

// redirty marks r again after its flush failed (s.mu held).
func (r flushRange) redirty() {
	if r.meta {
		r.f.metaDirty = true
		return
	}
	r.f.markEntry(r.lo)
	r.f.markEntry(r.hi - 1)
}

func (r flushRange) flush() error {
	from, to := int64(r.f.lay.entryPos(r.lo)), int64(r.f.lay.entryPos(r.hi))
	if r.meta {
		from, to = 0, int64(r.f.lay.entriesStart())
	}
	if err := r.f.mf.Flush(from, to); err != nil {
		return fmt.Errorf("index: flush %s: %w", r.f.path, err)
	}
	return nil
}
