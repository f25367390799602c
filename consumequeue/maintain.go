package consumequeue

import (
	"fmt"
	"math"

	"github.com/raftmq/raftmq/mmap"
)

// Recover rebuilds the queue's watermarks from its files, as RocketMQ's
// ConsumeQueue.recover: scan the units from the third-last file on (or from
// an earlier one if that file does not start with a real unit); the first
// invalid unit (size <= 0, negative offset, all zero, a filler after a real
// unit, or a unit starting before the previous one ends) ends the queue.
// Everything after it is cut (later files deleted, the rest of its file
// zeroed). Open calls it for every queue.
func (q *Queue) Recover() error {
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
	k := scanStart(segs)
	end, st := scanSegments(segs[k:], scanState{fillersOK: k == 0})
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

// scanSegments scans units across segs and returns the byte offset where the
// valid units end and the final scan state.
func scanSegments(segs []mmap.Segment, st scanState) (int64, scanState) {
	end := segs[0].Start
	for _, s := range segs {
		n, next, stopped := scanUnits(s.File.Bytes(), st)
		st = next
		end = s.Start + int64(n)*UnitSize
		if stopped {
			break
		}
	}
	return end, st
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
