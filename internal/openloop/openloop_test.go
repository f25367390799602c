package openloop

import (
	"context"
	"testing"
	"time"
)

func TestDue(t *testing.T) {
	start := time.Unix(1000, 0)
	for _, tc := range []struct {
		k    int64
		rate float64
		want time.Duration
	}{{0, 100, 0}, {1, 100, 10 * time.Millisecond}, {256, 128, 2 * time.Second}, {3, 0.5, 6 * time.Second}} {
		if got := Due(start, tc.k, tc.rate).Sub(start); got != tc.want {
			t.Errorf("Due(k=%d, rate=%v) = start+%v, want start+%v", tc.k, tc.rate, got, tc.want)
		}
	}
}

// SleepUntil returns at once for a past time, false once ctx ends before
// the time, and true once the time has come.
func TestSleepUntil(t *testing.T) {
	if !SleepUntil(context.Background(), time.Now().Add(-time.Second)) {
		t.Fatal("a time in the past: false")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if SleepUntil(ctx, time.Now().Add(time.Hour)) {
		t.Fatal("an ended context before a time an hour away: true")
	}
	due := time.Now().Add(20 * time.Millisecond)
	if !SleepUntil(context.Background(), due) || time.Now().Before(due) {
		t.Fatal("returned before the due time")
	}
}
