package store

import (
	"context"
	"errors"
	"math/rand"
	"testing"
	"time"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/vfs"
)

func TestAppendGetReopen(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := smallConfig("/data/store")
	s := mustOpen(t, fsys, cfg)
	var idx uint64
	for n := 0; n < 300; n += 3 {
		idx++
		msgs := []message.Message{testMessage("demo", 0, n, nil), testMessage("demo", 1, n+1, nil), testMessage("demo", 0, n+2, nil)}
		res, err := s.AppendMessages(header(idx), msgs, nil)
		if err != nil {
			t.Fatalf("append %d: %v", idx, err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("put: %v", r.Err)
			}
		}
	}
	check := func(s *Store) {
		t.Helper()
		if got, _ := s.MaxOffset("demo", 0); got != 200 {
			t.Fatalf("queue 0 max %d, want 200", got)
		}
		r, err := s.GetMessages("demo", 0, 0, 32, 1<<20, "")
		if err != nil || r.Status != Found || len(r.Messages) != 32 || r.NextOffset != 32 {
			t.Fatalf("get: %v %v %d next %d", err, r.Status, len(r.Messages), r.NextOffset)
		}
		if string(r.Messages[1].Body) != "msg-2-" || r.Messages[1].QueueOffset != 1 {
			t.Fatalf("message 1: %q offset %d", r.Messages[1].Body, r.Messages[1].QueueOffset)
		}
		r, _ = s.GetMessages("demo", 0, 0, 32, 1<<20, "blue")
		for _, m := range r.Messages {
			if tag, _ := m.Property(message.PropertyTags); tag != "blue" {
				t.Fatalf("tag filter let %q through", tag)
			}
		}
		found, err := s.QueryByKey("demo", "k150", 10, 0, 1<<62)
		if err != nil || len(found) != 1 || string(found[0].Body) != "msg-150-" {
			t.Fatalf("query k150: %v %d", err, len(found))
		}
		byID, err := s.LookupByMsgID("demo", "U00000151")
		if err != nil || len(byID) != 1 || byID[0].QueueID != 1 {
			t.Fatalf("lookup by uniq key: %v %d", err, len(byID))
		}
		if got, _ := s.Applied(); got != 100 {
			t.Fatalf("applied %d", got)
		}
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, fsys, cfg)
	defer s.Close()
	if mode := s.RecoveryPlan().Mode.String(); mode != "normal" {
		t.Fatalf("mode %s after a clean close", mode)
	}
	check(s)
	if _, err := s.AppendMessages(header(100), []message.Message{testMessage("demo", 0, 1, nil)}, nil); !errors.Is(err, ErrAlreadyApplied) {
		t.Fatalf("re-apply: %v", err)
	}
}

func TestGetStatuses(t *testing.T) {
	s := mustOpen(t, vfs.NewMem(), smallConfig("/s"))
	defer s.Close()
	if r, _ := s.GetMessages("nope", 0, 0, 1, 0, ""); r.Status != NoMatchedLogicQueue {
		t.Fatalf("unknown topic: %v", r.Status)
	}
	if err := s.CreateTopic(header(1), TopicConfig{Name: "t", Queues: 2}); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.GetMessages("t", 1, 0, 1, 0, ""); r.Status != NoMessageInQueue {
		t.Fatalf("empty queue: %v", r.Status)
	}
	if _, err := s.AppendMessages(header(2), []message.Message{testMessage("t", 1, 0, nil), testMessage("t", 1, 1, nil)}, nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		off  int64
		want GetStatus
		next int64
	}{{0, Found, 2}, {2, OffsetOverflowOne, 2}, {5, OffsetOverflowBadly, 2}} {
		r, err := s.GetMessages("t", 1, c.off, 10, 0, "")
		if err != nil || r.Status != c.want || r.NextOffset != c.next {
			t.Fatalf("offset %d: %v %v next %d", c.off, err, r.Status, r.NextOffset)
		}
	}
	if r, _ := s.GetMessages("t", 2, 0, 1, 0, ""); r.Status != NoMatchedLogicQueue {
		t.Fatalf("queue out of range: %v", r.Status)
	}
}

func TestBadInputChangesNothing(t *testing.T) {
	s := mustOpen(t, vfs.NewMem(), smallConfig("/s"))
	defer s.Close()
	bad := []message.Message{
		{Topic: "", Body: []byte("x")},
		{Topic: "has space", Body: []byte("x")},
		{Topic: string(make([]byte, 200)), Body: []byte("x")},
		{Topic: "ok", QueueID: -1, Body: []byte("x")},
		{Topic: "ok", QueueID: 99, Body: []byte("x")},
		{Topic: "ok", Body: make([]byte, 9<<10)},
	}
	for i := range bad {
		if err := s.ValidateMessage(&bad[i]); err == nil {
			t.Errorf("message %d accepted", i)
		}
	}
	res, err := s.AppendMessages(header(1), bad, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err == nil {
			t.Errorf("message %d applied", i)
		}
	}
	if len(s.Topics()) != 0 {
		t.Fatalf("bad input created topics: %v", s.Topics())
	}
	if err := s.CreateTopic(header(2), TopicConfig{Name: "bad topic", Queues: 1}); !errors.Is(err, ErrBadTopic) {
		t.Fatalf("bad topic: %v", err)
	}
	if err := s.CreateTopic(header(2), TopicConfig{Name: "t", Queues: 0}); !errors.Is(err, ErrBadQueue) {
		t.Fatalf("zero queues: %v", err)
	}
}

func TestWaitMessageWakes(t *testing.T) {
	s := mustOpen(t, vfs.NewMem(), smallConfig("/s"))
	defer s.Close()
	if _, err := s.AppendMessages(header(1), []message.Message{testMessage("w", 0, 0, nil)}, nil); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- s.WaitMessage(ctx, "w", 0, 1)
	}()
	if _, err := s.AppendMessages(header(2), []message.Message{testMessage("w", 0, 1, nil)}, nil); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("wait: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := s.WaitMessage(ctx, "w", 0, 5); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait with nothing new: %v", err)
	}
}

var _ = rand.New
