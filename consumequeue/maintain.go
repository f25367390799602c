package consumequeue

import (
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/raftmq/raftmq/mmap"
)

// Recover rebuilds the queue's watermarks from its files, as RocketMQ's
// ConsumeQueue.recover: scan the units from the third-last file on (or from
// an earlier one if that file does not start with a real unit); the first
// invalid unit (size <= 0, negative offset, all zero, a filler after a real
// unit, or a unit starting before the previous one ends) ends the queue.
// Everything after it is cut (later files deleted, the rest of its file
// zeroed). Open calls it for every queue, from the queue's last durable
// unit when Config.Durable names one.
func (q *Queue) Recover() error { return q.recover(durableUnits{}) }

// durableUnits: the first count units of a queue are durable and valid if
// the last of them is a real unit ending at or below phy (Config.Durable).
type durableUnits struct{ count, phy int64 }

// recover is Recover with the durable units known: the scan starts after
// the last of them when that is later than the third-last file.
func (q *Queue) recover(durable durableUnits) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return ErrClosed
	}
	segs := q.mq.Segments()
	if len(segs) == 0 {
		q.minOffset, q.maxOffset, q.maxPhy = 0, 0, 0
		return nil
	}
	k, from, st0, err := scanPlan(segs, durable)
	if err != nil {
		return fmt.Errorf("consumequeue: %s-%d: recover: %w", q.topic, q.id, err)
	}
	end, st, err := scanSegments(segs[k:], from, st0)
	if err != nil { // an I/O error says nothing about the units: cut nothing
		return fmt.Errorf("consumequeue: %s-%d: recover: %w", q.topic, q.id, err)
	}
	if err := q.mq.TruncateDirty(end); err != nil {
		return fmt.Errorf("consumequeue: %s-%d: truncate dirty tail at %d: %w", q.topic, q.id, end, err)
	}
	q.maxOffset = end / UnitSize
	q.maxPhy = st.prevEnd
	q.minOffset = q.firstRealLocked()
	if end < segs[len(segs)-1].End() {
		q.log.Debug("consume queue recovered", "topic", q.topic, "queue", q.id,
			"min", q.minOffset, "max", q.maxOffset, "maxPhy", q.maxPhy)
	}
	return nil
}

// scanPlan is where recovery scans from: file k of segs, byte from within
// it, with state st. Without durable units (or when the last of them lies
// before the third-last file, or is not a real unit below durable.phy)
// that is scanStart's file from its start; else the unit after the last
// durable one, with the state that unit leaves.
func scanPlan(segs []mmap.Segment, durable durableUnits) (k int, from int64, st scanState, err error) {
	k = scanStart(segs)
	st = scanState{fillersOK: k == 0}
	if durable.count <= 0 {
		return k, 0, st, nil
	}
	last := (durable.count - 1) * UnitSize
	j := -1
	for i := range segs {
		if segs[i].Start <= last && last+UnitSize <= segs[i].End() {
			j = i
		}
	}
	if j < k { // also when no file holds it (j < 0)
		return k, 0, st, nil
	}
	var b [UnitSize]byte
	if err := readUnit(segs[j].File, last-segs[j].Start, b[:]); err != nil {
		return 0, 0, st, err
	}
	u := decodeUnit(b[:])
	if !u.Valid() || u.IsFiller() || u.End() > durable.phy {
		return k, 0, st, nil
	}
	return j, last - segs[j].Start + UnitSize, scanState{prevEnd: u.End()}, nil
}

// readUnit reads the unit at byte off of f into b: with pread where f has
// it (see scanSegments), else from the mapping.
func readUnit(f mmap.File, off int64, b []byte) error {
	if r, ok := mmap.ReaderAt(f); ok {
		_, err := r.ReadAt(b, off)
		return err
	}
	copy(b, f.Bytes()[off:])
	return nil
}

// scanStart is the file recovery scans from: the third-last, or the last
// file before it whose first unit is a real one. (Files created but never
// written, e.g. left by a crash, would otherwise count as full.)
func scanStart(segs []mmap.Segment) int {
	k := max(0, len(segs)-3)
	for k > 0 {
		if u := decodeUnit(segs[k].File.Bytes()); u.Valid() && !u.IsFiller() {
			break
		}
		k--
	}
	return k
}

// scanSegments scans units across segs, from byte from of the first, and
// returns the byte offset where the valid units end and the final scan
// state, or the error of a read. Files that have a pread path
// (mmap.ReaderAt) are read in chunks rather than through their fresh
// mappings: a restart recovers every queue.
func scanSegments(segs []mmap.Segment, from int64, st scanState) (int64, scanState, error) {
	end := segs[0].Start + from
	var buf []byte
	for _, s := range segs {
		var n int
		var stopped bool
		if r, ok := mmap.ReaderAt(s.File); ok {
			if buf == nil {
				buf = make([]byte, scanChunkUnits*UnitSize)
			}
			var err error
			if n, st, stopped, err = scanThrough(r, from, s.File.Size(), buf, st); err != nil {
				return 0, st, fmt.Errorf("read %s: %w", s.File.Name(), err)
			}
		} else {
			n, st, stopped = scanUnits(s.File.Bytes()[from:], st)
		}
		end = s.Start + from + int64(n)*UnitSize
		if stopped {
			break
		}
		from = 0
	}
	return end, st, nil
}

// scanChunkUnits is how many units scanThrough reads at a time (256 KiB).
const scanChunkUnits = 13107

// scanThrough is scanUnits over bytes [from, size) of a file read through r
// in chunks of buf.
func scanThrough(r io.ReaderAt, from, size int64, buf []byte, st scanState) (int, scanState, bool, error) {
	total := 0
	for off := from; off < size; {
		chunk := buf[:min(int64(len(buf)), size-off)]
		got, err := r.ReadAt(chunk, off)
		if err != nil && !(errors.Is(err, io.EOF) && got == len(chunk)) {
			return total, st, true, err
		}
		n, next, stopped := scanUnits(chunk, st)
		total, st = total+n, next
		if stopped {
			return total, st, true, nil
		}
		off += int64(got)
	}
	return total, st, false, nil
}

// firstRealLocked is the offset of the first unit that is not a filler (or
// maxOffset if there is none).
func (q *Queue) firstRealLocked() int64 {
	off := q.mq.MinOffset() / UnitSize
	for off < q.maxOffset && q.unitOrFiller(off).IsFiller() {
		off++
	}
	return off
}

// searchLocked returns the first offset in [lo, hi) for which pred holds,
// assuming pred is false then true over the range (hi if never).
func (q *Queue) searchLocked(lo, hi int64, pred func(Unit) bool) int64 {
	for lo < hi {
		mid := lo + (hi-lo)/2
		if pred(q.unitOrFiller(mid)) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// TruncateAtPhy removes every unit whose PhyOffset >= phy: their bytes are
// zeroed and files after the cut are deleted. Fillers are kept.
func (q *Queue) TruncateAtPhy(phy int64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return ErrClosed
	}
	if q.mq.Empty() {
		return nil
	}
	first := q.mq.MinOffset() / UnitSize
	cut := q.searchLocked(first, q.maxOffset, func(u Unit) bool {
		return !u.IsFiller() && u.PhyOffset >= phy
	})
	if cut == q.maxOffset {
		return nil
	}
	if err := q.mq.TruncateDirty(cut * UnitSize); err != nil {
		return fmt.Errorf("consumequeue: %s-%d: truncate at offset %d: %w", q.topic, q.id, cut, err)
	}
	q.maxOffset = cut
	q.maxPhy = 0
	if cut > first {
		if u := q.unitOrFiller(cut - 1); !u.IsFiller() {
			q.maxPhy = u.End()
		}
	}
	q.minOffset = min(q.minOffset, cut)
	return nil
}

// DeleteBelowPhy deletes, oldest first, non-last files whose last unit ends
// below minPhy (the commitlog's new minimum), then moves MinOffset to the
// first unit with PhyOffset >= minPhy (MaxOffset if none). It returns the
// number of files deleted.
func (q *Queue) DeleteBelowPhy(minPhy int64) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return 0, ErrClosed
	}
	n, err := q.mq.DeleteOldest(math.MaxInt, func(s mmap.Segment) bool {
		b := s.File.Bytes()
		u := decodeUnit(b[len(b)-UnitSize:])
		return !(u.Valid() && !u.IsFiller() && u.End() < minPhy)
	})
	if err != nil {
		return n, fmt.Errorf("consumequeue: %s-%d: delete expired files: %w", q.topic, q.id, err)
	}
	if first := q.mq.MinOffset() / UnitSize; q.minOffset < first {
		q.minOffset = first
	}
	q.minOffset = q.searchLocked(q.minOffset, q.maxOffset, func(u Unit) bool {
		return !u.IsFiller() && u.PhyOffset >= minPhy
	})
	return n, nil
}
