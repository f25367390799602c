package fsm

import (
	"errors"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/store"
)

// UpdateTopic entries reach the store: growth and perm changes apply, a
// shrink is a deterministic rejection that still advances the applied index.
func TestApplyUpdateTopic(t *testing.T) {
	f := newTestFSM(t)
	resps := f.ApplyBatch([]*raft.Log{
		entry(t, 1, Command{Type: CmdCreateTopic, Topic: store.TopicConfig{Name: "T", Queues: 4, Perm: 6}}),
		entry(t, 2, Command{Type: CmdUpdateTopic, Topic: store.TopicConfig{Name: "T", Queues: 8, Perm: 4}}),
		entry(t, 3, Command{Type: CmdUpdateTopic, Topic: store.TopicConfig{Name: "T", Queues: 2}}),
		entry(t, 4, Command{Type: CmdUpdateTopic, Topic: store.TopicConfig{Name: "missing", Queues: 2}}),
		entry(t, 5, batch(1000, "T", 8)), // queues 4..7 exist now
	})
	wantErr := []error{nil, nil, store.ErrBadQueue, store.ErrNoSuchTopic, nil}
	for i, r := range resps {
		got := r.(*ApplyResponse).Err
		if !errors.Is(got, wantErr[i]) || (wantErr[i] == nil) != (got == nil) {
			t.Errorf("entry %d: %v, want %v", i+1, got, wantErr[i])
		}
	}
	for _, r := range resps[4].(*ApplyResponse).Results {
		if r.Err != nil {
			t.Fatalf("message to queue %d: %v", r.QueueID, r.Err)
		}
	}
	if got, _ := f.Store().Topic("T"); got != (store.TopicConfig{Name: "T", Queues: 8, Perm: 4}) {
		t.Fatalf("topic after updates: %+v", got)
	}
	if idx, _ := f.Store().Applied(); idx != 5 {
		t.Fatalf("applied %d, want 5", idx)
	}
	if st := f.Stats(); st.Applied != 3 || st.Rejected != 2 {
		t.Fatalf("stats %+v", st)
	}
}
