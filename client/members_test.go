package client

import (
	"fmt"
	"slices"
	"testing"
)

// TestAllocateAveragely: RocketMQ's averaging gives every queue to exactly
// one member, contiguous runs whose sizes differ by at most one, the
// larger runs first; members past the queue count get none; a stranger
// gets none.
func TestAllocateAveragely(t *testing.T) {
	queues := func(n int) []int32 {
		qs := make([]int32, n)
		for i := range qs {
			qs[i] = int32(n - 1 - i) // unsorted on purpose
		}
		return qs
	}
	for _, c := range []struct {
		queues  int
		members int
		want    [][]int32
	}{
		{8, 1, [][]int32{{0, 1, 2, 3, 4, 5, 6, 7}}},
		{8, 2, [][]int32{{0, 1, 2, 3}, {4, 5, 6, 7}}},
		{8, 3, [][]int32{{0, 1, 2}, {3, 4, 5}, {6, 7}}},
		{3, 5, [][]int32{{0}, {1}, {2}, nil, nil}},
		{0, 2, [][]int32{nil, nil}},
	} {
		var members []string
		for i := c.members - 1; i >= 0; i-- {
			members = append(members, fmt.Sprintf("m%02d", i))
		}
		for i := 0; i < c.members; i++ {
			got := AllocateAveragely(queues(c.queues), members, fmt.Sprintf("m%02d", i))
			if !slices.Equal(got, c.want[i]) {
				t.Fatalf("%d queues, %d members: member %d gets %v, want %v", c.queues, c.members, i, got, c.want[i])
			}
		}
	}
	if got := AllocateAveragely(queues(8), []string{"a"}, "b"); got != nil {
		t.Fatalf("a stranger gets %v", got)
	}
}
