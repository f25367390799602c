package consumequeue

import "fmt"

// TruncateAtOffset keeps only the units below queue offset off: later units
// are zeroed and files after the cut deleted. Recovery uses it with the
// checkpoint's queue table, which is exact even where a damaged unit's
// PhyOffset would mislead TruncateAtPhy's search.
func (q *Queue) TruncateAtOffset(off int64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return ErrClosed
	}
	if q.mq.Empty() || off >= q.maxOffset {
		return nil
	}
	cut := max(off, q.mq.MinOffset()/UnitSize)
	if err := q.mq.TruncateDirty(cut * UnitSize); err != nil {
		return fmt.Errorf("consumequeue: %s-%d: truncate at offset %d: %w", q.topic, q.id, cut, err)
	}
	q.maxOffset = cut
	q.maxPhy = 0
	if cut > q.mq.MinOffset()/UnitSize {
		if u := q.unitOrFiller(cut - 1); !u.IsFiller() {
			q.maxPhy = u.End()
		}
	}
	q.minOffset = min(q.minOffset, cut)
	return nil
}
