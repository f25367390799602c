package client

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

// waitClockPast returns once the wall clock's millisecond is past ms (store
// timestamps come from the same clock), within a bound.
func waitClockPast(t *testing.T, ms int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().UnixMilli() <= ms {
		if time.Now().After(deadline) {
			t.Fatalf("clock did not pass %d ms", ms)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// Over a real server: DescribeGroup and ListGroups after a consumer's
// commits, then ResetGroup to every kind of target moves the offsets of
// every queue (backwards too) in one commit and reports from/to.
func TestGroupsDescribeAndReset(t *testing.T) {
	_, ctx, c := withTopic(t, "G", 2)
	send := func(perQueue int) int64 {
		t.Helper()
		var ms []Message
		for q := range 2 {
			for range perQueue {
				ms = append(ms, NewMessage("G", []byte("x")).WithQueue(int32(q)))
			}
		}
		res, err := c.Send(ctx, ms...) // one entry: one store timestamp
		if err != nil {
			t.Fatal(err)
		}
		return res[0].StoreTimestamp
	}
	tsA := send(3) // offsets 0..2 in each queue
	waitClockPast(t, tsA)
	tsB := send(2) // offsets 3..4
	if tsB <= tsA {
		t.Fatalf("store timestamps %d then %d", tsA, tsB)
	}
	if err := c.CommitOffset(ctx, "g", "G", 0, 4); err != nil {
		t.Fatal(err)
	}
	got, err := c.DescribeGroup(ctx, "g", "")
	want := []GroupQueue{{Topic: "G", QueueID: 0, Committed: 4, Max: 5, Lag: 1}, {Topic: "G", QueueID: 1, Committed: NoCommit, Max: 5, Lag: 5}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("describe: %v\n got %+v\nwant %+v", err, got, want)
	}
	list, err := c.ListGroups(ctx)
	if err != nil || !reflect.DeepEqual(list, []GroupSummary{{Group: "g", Topics: []string{"G"}, Lag: 6}}) {
		t.Fatalf("list: %v %+v", err, list)
	}
	if _, err := c.DescribeGroup(ctx, "nobody", ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("describe of an unknown group: %v, want ErrNotFound", err)
	}

	steps := []struct {
		name   string
		target ResetTarget
		want   [2]int64 // new offsets of queues 0 and 1
	}{
		{"earliest", ResetTarget{To: ResetToEarliest}, [2]int64{0, 0}},
		{"latest", ResetTarget{To: ResetToLatest}, [2]int64{5, 5}},
		{"offset", ResetTarget{To: ResetToOffset, Offset: 2}, [2]int64{2, 2}},
		{"offset beyond the end", ResetTarget{To: ResetToOffset, Offset: 99}, [2]int64{5, 5}},
		{"time of B", ResetTarget{To: ResetToTime, Time: time.UnixMilli(tsB)}, [2]int64{3, 3}},
		{"time inside A's millisecond", ResetTarget{To: ResetToTime, Time: time.UnixMilli(tsA).Add(500 * time.Microsecond)}, [2]int64{3, 3}},
		{"time of A", ResetTarget{To: ResetToTime, Time: time.UnixMilli(tsA)}, [2]int64{0, 0}},
		{"time after everything", ResetTarget{To: ResetToTime, Time: time.UnixMilli(tsB + 1)}, [2]int64{5, 5}},
	}
	prev := [2]int64{4, NoCommit}
	for _, st := range steps {
		res, err := c.ResetGroup(ctx, "g", "G", st.target)
		wantRes := []GroupReset{{0, prev[0], st.want[0]}, {1, prev[1], st.want[1]}}
		if err != nil || !reflect.DeepEqual(res, wantRes) {
			t.Fatalf("reset to %s: %v\n got %+v\nwant %+v", st.name, err, res, wantRes)
		}
		for q := range int32(2) {
			off, found, err := c.QueryOffset(ctx, "g", "G", q)
			if err != nil || !found || off != st.want[q] {
				t.Fatalf("reset to %s: queue %d committed %d found %v err %v, want %d", st.name, q, off, found, err, st.want[q])
			}
		}
		prev = st.want
	}

	for _, bad := range []ResetTarget{{}, {To: ResetToOffset, Offset: -1}, {To: ResetToTime}, {To: 99}} {
		if _, err := c.ResetGroup(ctx, "g", "G", bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("reset to %+v: %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := c.ResetGroup(ctx, "g", "nosuch", ResetTarget{To: ResetToEarliest}); !errors.Is(err, ErrNotFound) {
		t.Errorf("reset in a missing topic: %v, want ErrNotFound", err)
	}
}

func TestCeilMilli(t *testing.T) {
	base := time.UnixMilli(1_700_000_000_123)
	for in, want := range map[time.Time]time.Time{
		base:                       base,
		base.Add(time.Nanosecond):  base.Add(time.Millisecond),
		base.Add(999_999):          base.Add(time.Millisecond),
		base.Add(-time.Nanosecond): base,
	} {
		if got := ceilMilli(in); !got.Equal(want) {
			t.Errorf("ceilMilli(%v) = %v, want %v", in, got, want)
		}
	}
}
