package store

import (
	"errors"
	"fmt"
	"testing"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/vfs"
)

// Every sentinel of the store has one kind, wrapped or not; anything else
// is local (and so not deterministic across replicas).
func TestErrorKinds(t *testing.T) {
	cases := []struct {
		err  error
		want ErrorKind
	}{
		{ErrBadTopic, KindBadInput}, {ErrBadQueue, KindBadInput}, {ErrMessageTooLarge, KindBadInput},
		{ErrPropsTooLarge, KindBadInput}, {ErrBadOffset, KindBadInput}, {ErrBadCommand, KindBadInput},
		{ErrBadMessage, KindBadInput}, {ErrNoSuchTopic, KindNotFound}, {ErrNotFound, KindNotFound},
		{ErrTopicExists, KindExists}, {ErrQueueLimit, KindLimit},
		{ErrClosed, KindLocal}, {ErrFailedClosed, KindLocal}, {ErrAlreadyApplied, KindLocal},
		{vfs.ErrInjected, KindLocal}, {errors.New("EIO"), KindLocal},
	}
	for _, c := range cases {
		wrapped := fmt.Errorf("entry 7: %w", c.err)
		if got := KindOf(wrapped); got != c.want {
			t.Errorf("KindOf(%v) = %d, want %d", wrapped, got, c.want)
		}
		if got := Deterministic(wrapped); got != (c.want != KindLocal) {
			t.Errorf("Deterministic(%v) = %v", wrapped, got)
		}
	}
	if Deterministic(nil) {
		t.Error("Deterministic(nil)")
	}
}

// A message the commitlog refuses for something other than its topic is
// ErrBadMessage, not ErrBadTopic (every validation error used to be called
// a bad topic).
func TestBadMessageIsNotBadTopic(t *testing.T) {
	s := mustOpen(t, vfs.NewMem(), smallConfig("/data/store"))
	defer s.Close()
	m := testMessage("t", 0, 0, nil)
	m.SysFlag |= message.SysFlagBornHostV6
	err := s.checkMessage(&m)
	if !errors.Is(err, ErrBadMessage) || errors.Is(err, ErrBadTopic) || !errors.Is(err, message.ErrBadSysFlag) {
		t.Fatalf("IPv6 sysflag: %v, want ErrBadMessage wrapping message.ErrBadSysFlag", err)
	}
	m = testMessage("bad topic", 0, 0, nil)
	if err := s.checkMessage(&m); !errors.Is(err, ErrBadTopic) {
		t.Fatalf("bad topic: %v, want ErrBadTopic", err)
	}
}

// MaxTotalQueues bounds the queues of all topics together, however they
// come: CreateTopic, UpdateTopic growing a topic, and topics auto-created by
// messages (several in one entry count together). A refused message gets
// ErrQueueLimit in its result and the rest of the entry is stored.
func TestMaxTotalQueues(t *testing.T) {
	cfg := smallConfig("/data/store")
	cfg.DefaultQueues, cfg.MaxQueues, cfg.MaxTotalQueues = 4, 8, 14
	s := mustOpen(t, vfs.NewMem(), cfg)
	defer s.Close()
	if err := s.CreateTopic(header(1), TopicConfig{Name: "a", Queues: 8}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTopic(header(2), TopicConfig{Name: "b", Queues: 8}); !errors.Is(err, ErrQueueLimit) || KindOf(err) != KindLimit {
		t.Fatalf("16 queues of 14: %v, want ErrQueueLimit", err)
	}
	// 8 used: one auto-created topic of 4 fits, a second in the same entry
	// does not; messages to existing or already admitted topics pass.
	msgs := []message.Message{testMessage("n1", 0, 0, nil), testMessage("n2", 0, 1, nil), testMessage("n1", 1, 2, nil), testMessage("a", 0, 3, nil)}
	res, err := s.AppendMessages(header(3), msgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{false, true, false, false} {
		if got := errors.Is(res[i].Err, ErrQueueLimit); got != want {
			t.Fatalf("message %d (%s): err %v, want limit %v", i, msgs[i].Topic, res[i].Err, want)
		}
	}
	if _, ok := s.Topic("n2"); ok {
		t.Fatal("a refused auto-create made the topic")
	}
	if _, ok := s.Topic("n1"); !ok {
		t.Fatal("the admitted auto-create made no topic")
	}
	if err := s.UpdateTopic(header(4), TopicConfig{Name: "n1", Queues: 7}); !errors.Is(err, ErrQueueLimit) {
		t.Fatalf("growing to 15 queues of 14: %v, want ErrQueueLimit", err)
	}
	if err := s.UpdateTopic(header(5), TopicConfig{Name: "n1", Queues: 6}); err != nil {
		t.Fatalf("growing to 14 queues of 14: %v", err)
	}
	if err := s.DeleteTopic(header(6), "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTopic(header(7), TopicConfig{Name: "b", Queues: 8}); err != nil {
		t.Fatalf("after a delete freed 8 queues: %v", err)
	}
}
