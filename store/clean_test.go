package store

import "testing"

// The numbers are a statfs of this project's CI machine: 252 GiB, 41 GiB
// used, 53 GiB available, the rest reserved. df says 42 %; counting the
// reserve as used (100 - avail/total) said 79 %, over the 75 % retention
// threshold, and retention deleted segments younger than FileReservedTime
// (found by cluster-tests: acknowledged messages gone after 20 seconds).
func TestUsedPercentExcludesReservedBlocks(t *testing.T) {
	cases := []struct {
		blocks, free, avail uint64
		want                int
	}{
		{66053021, 56186690, 14008985, 42},
		{100, 100, 100, 0},
		{100, 0, 0, 100},
		{100, 50, 40, 56}, // 50 used of 90 usable, rounded up like df
		{0, 0, 0, 0},
	}
	for _, c := range cases {
		if got := usedPercent(c.blocks, c.free, c.avail); got != c.want {
			t.Errorf("usedPercent(%d, %d, %d) = %d, want %d", c.blocks, c.free, c.avail, got, c.want)
		}
	}
}
