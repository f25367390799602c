package store

import (
	"reflect"
	"testing"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/vfs"
)

// GroupProgress lists committed offsets, queue ends and lag per queue; a
// commit that moves an offset back (a reset) holds, also after a reopen
// that replays the commands from the commitlog.
func TestGroupProgressAndBackwardCommit(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := smallConfig("/s")
	s := mustOpen(t, fsys, cfg)
	idx := uint64(0)
	next := func() EntryHeader { idx++; return header(idx) }
	for _, tc := range []TopicConfig{{Name: "A", Queues: 2, Perm: 6}, {Name: "B", Queues: 1, Perm: 6}} {
		if err := s.CreateTopic(next(), tc); err != nil {
			t.Fatal(err)
		}
	}
	// A-0 gets 5 messages, A-1 3, B-0 4.
	for i, q := range []struct {
		topic string
		queue int32
		n     int
	}{{"A", 0, 5}, {"A", 1, 3}, {"B", 0, 4}} {
		for j := range q.n {
			res, err := s.AppendMessages(next(), []message.Message{testMessage(q.topic, q.queue, i*100+j, nil)}, nil)
			if err != nil || res[0].Err != nil {
				t.Fatalf("append: %v %v", err, res)
			}
		}
	}
	commit := func(c ...OffsetCommit) {
		t.Helper()
		if err := s.CommitOffsets(next(), c); err != nil {
			t.Fatal(err)
		}
	}
	commit(OffsetCommit{Group: "g1", Topic: "A", QueueID: 0, Offset: 4}, OffsetCommit{Group: "g2", Topic: "B", QueueID: 0, Offset: 9})
	commit(OffsetCommit{Group: "g1", Topic: "A", QueueID: 0, Offset: 2}) // backwards: a reset

	want := []GroupQueue{
		{Group: "g1", Topic: "A", QueueID: 0, Committed: 2, Min: 0, Max: 5, Lag: 3},
		{Group: "g1", Topic: "A", QueueID: 1, Committed: NoCommit, Min: 0, Max: 3, Lag: 3},
		{Group: "g2", Topic: "B", QueueID: 0, Committed: 9, Min: 0, Max: 4, Lag: 0},
	}
	check := func(s *Store, what string) {
		t.Helper()
		if got := s.GroupProgress("", ""); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: GroupProgress(all):\n got %+v\nwant %+v", what, got, want)
		}
		if got := s.GroupProgress("g1", ""); !reflect.DeepEqual(got, want[:2]) {
			t.Fatalf("%s: GroupProgress(g1): %+v", what, got)
		}
		// A topic the group has no offsets in: every queue, none committed.
		got := s.GroupProgress("g2", "A")
		wantA := []GroupQueue{
			{Group: "g2", Topic: "A", QueueID: 0, Committed: NoCommit, Max: 5, Lag: 5},
			{Group: "g2", Topic: "A", QueueID: 1, Committed: NoCommit, Max: 3, Lag: 3},
		}
		if !reflect.DeepEqual(got, wantA) {
			t.Fatalf("%s: GroupProgress(g2, A): %+v", what, got)
		}
		if got := s.GroupProgress("nobody", ""); len(got) != 0 {
			t.Fatalf("%s: unknown group: %+v", what, got)
		}
		if got := s.GroupProgress("", "nosuchtopic"); len(got) != 0 {
			t.Fatalf("%s: unknown topic: %+v", what, got)
		}
	}
	check(s, "live")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopen: the offsets come back from the checkpoint or the replayed
	// command frames, the reset one included.
	s = mustOpen(t, fsys, cfg)
	defer s.Close()
	check(s, "reopened")
}
