package consumequeue

import "fmt"

// OffsetByTime finds a queue offset by store time with RocketMQ's
// getOffsetInQueueByTime semantics; storeTime returns the store timestamp of
// the message at a commitlog offset (one random read per probe, O(log n)
// probes).
//
//   - LOWER (upper=false): the first unit whose store time is >= ts;
//     MaxOffset if every unit is older (last+1), MinOffset if every unit is
//     newer.
//   - UPPER (upper=true): the last unit whose store time is <= ts; the last
//     unit if every unit is older; 0 if every unit is newer (as RocketMQ).
//
// An error from storeTime is returned wrapped.
func (q *Queue) OffsetByTime(ts int64, upper bool, storeTime func(phy int64) (int64, error)) (int64, error) {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		return 0, ErrClosed
	}
	lo, hi := q.minOffset, q.maxOffset
	var err error
	pred := func(u Unit) bool {
		if err != nil {
			return true
		}
		var t int64
		if t, err = storeTime(u.PhyOffset); err != nil {
			return true
		}
		if upper {
			return t > ts
		}
		return t >= ts
	}
	i := q.searchLocked(lo, hi, pred)
	if err != nil {
		return 0, fmt.Errorf("consumequeue: %s-%d: store time: %w", q.topic, q.id, err)
	}
	if !upper {
		return i, nil
	}
	if i == lo {
		return 0, nil
	}
	return i - 1, nil
}
