// Package openloop paces an open-loop load: the k-th item of a load of
// rate items per second is due at start + k/rate, however long the items
// before it took, and its latency counts from that due time (no
// coordinated omission). `raftmq bench produce --rate` and the bench's
// bare-Raft ceiling pace their loads with it, so their latencies compare.
package openloop

import (
	"context"
	"time"
)

// Due is when item k (from 0) of a load of rate items per second that
// started at start is due.
func Due(start time.Time, k int64, rate float64) time.Time {
	return start.Add(time.Duration(float64(k) / rate * float64(time.Second)))
}

// SleepUntil waits until t, or reports false when ctx ends first.
func SleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return true
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
		return true
	}
}
