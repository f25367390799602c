package membership

import (
	"slices"
	"sync"
	"testing"
	"time"
)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestTable: members join on their first heartbeat, are listed sorted,
// leave on Leave, on RemoveIf and after the expiry without a heartbeat;
// a heartbeat within the expiry keeps a member.
func TestTable(t *testing.T) {
	c := &clock{now: time.Unix(1000, 0)}
	tb := New[int](10*time.Second, c.Now)
	if !tb.Beat("g", "m2", 2) || !tb.Beat("g", "m1", 1) || tb.Beat("g", "m1", 1) {
		t.Fatal("Beat: first heartbeats must join, a repeated one must not")
	}
	tb.Beat("h", "m3", 3)
	if got := tb.Members("g"); !slices.Equal(got, []string{"m1", "m2"}) {
		t.Fatalf("members %v", got)
	}
	if got := tb.Values("g"); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("values %v", got)
	}
	if !tb.Leave("g", "m2") || tb.Leave("g", "m2") {
		t.Fatal("Leave must report membership once")
	}
	if got := tb.RemoveIf(func(v int) bool { return v == 3 }); !slices.Equal(got, []string{"h"}) {
		t.Fatalf("RemoveIf changed %v", got)
	}
	if got := tb.Groups(); !slices.Equal(got, []string{"g"}) {
		t.Fatalf("groups %v", got)
	}
	c.advance(9 * time.Second)
	tb.Beat("g", "m1", 1)
	tb.Beat("g", "m4", 4)
	c.advance(9 * time.Second)
	if got := tb.Members("g"); !slices.Equal(got, []string{"m1", "m4"}) {
		t.Fatalf("members beating within the expiry: %v", got)
	}
	c.advance(2 * time.Second)
	if got := tb.Members("g"); len(got) != 0 {
		t.Fatalf("members 11 s after their last heartbeat: %v", got)
	}
	if !tb.Beat("g", "m1", 1) {
		t.Fatal("an expired member must join again")
	}
}
