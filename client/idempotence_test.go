package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/transport/transporttest"
)

// lossyAnswers is a real single-node store whose first answer to every
// other Send is lost after the messages were stored: the client sees an
// error that leaves the outcome unknown, as after a leader that applied a
// Send and died before answering.
type lossyAnswers struct {
	*transporttest.Local
	mu     sync.Mutex
	sends  int
	losses int
}

func (l *lossyAnswers) Send(ctx context.Context, msgs []message.Message) ([]store.PutResult, error) {
	res, err := l.Local.Send(ctx, msgs)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sends++
	if err == nil && l.sends%2 == 1 {
		l.losses++
		return nil, status.Error(codes.Unavailable, "connection lost after the messages were stored")
	}
	return res, err
}

func startLossy(t *testing.T) (*lossyAnswers, string) {
	t.Helper()
	local, err := transporttest.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = local.Close() })
	b := &lossyAnswers{Local: local}
	addr := serve(t, b)
	local.SetAPIAddr(addr)
	return b, addr
}

// TestIdempotentSendRetriesUnknownOutcomes: with idempotence (the default)
// a Send whose answer was lost after its messages were stored is sent
// again and answered with the first copies' results; the store holds each
// message once. Without it the same loss is ErrOutcomeUnknown.
func TestIdempotentSendRetriesUnknownOutcomes(t *testing.T) {
	b, addr := startLossy(t)
	c := newClient(t, addr)
	ctx := testCtx(t)
	if err := c.CreateTopic(ctx, "idem", 2); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for i := range 5 {
		msgs := make([]Message, 4)
		for j := range msgs {
			msgs[j] = NewMessage("idem", fmt.Appendf(nil, "m%d-%d", i, j)).WithQueue(0)
		}
		res, err := c.Send(ctx, msgs...)
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		for j, r := range res {
			if r.Err != nil || seen[r.QueueOffset] {
				t.Fatalf("send %d message %d: %+v (offset seen before: %v)", i, j, r, seen[r.QueueOffset])
			}
			seen[r.QueueOffset] = true
		}
	}
	if r := c.Stats().Resent; r != uint64(b.losses) {
		t.Fatalf("Stats().Resent = %d, want one resend per lost answer (%d)", r, b.losses)
	}
	if b.losses < 5 {
		t.Fatalf("%d answers lost; the test needs every Send's first answer lost", b.losses)
	}
	if max, err := b.Reader().MaxOffset("idem", 0); err != nil || max != 20 {
		t.Fatalf("queue holds %d messages (%v), want 20: each stored once", max, err)
	}
	if hits := b.Reader().(*store.Store).Stats().DedupHits; hits != 20 {
		t.Fatalf("dedup hits %d, want 20 (every message of every retry)", hits)
	}

	plain, err := New(ctx, []string{addr}, Options{DisableIdempotence: true})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	// One loss per two Sends: one of two in a row is answered unknown.
	var unknown int
	for range 2 {
		_, err := plain.Send(ctx, NewMessage("idem", []byte("plain")).WithQueue(1))
		if IsOutcomeUnknown(err) {
			unknown++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if unknown != 1 {
		t.Fatalf("%d of 2 non-idempotent Sends unknown, want 1", unknown)
	}
}

// TestPreparedMessagesSendOnce: messages from Prepare carry their PSEQ, so
// sending them again after any outcome stores nothing new.
func TestPreparedMessagesSendOnce(t *testing.T) {
	local := transporttest.StartT(t)
	c := newClient(t, local.Addr)
	ctx := testCtx(t)
	msgs := c.Prepare(NewMessage("prep", []byte("a")).WithQueue(0), NewMessage("prep", []byte("b")).WithQueue(0))
	for _, m := range msgs {
		if _, ok := m.Properties[message.PropertyProducerSeq]; !ok || m.ID == "" {
			t.Fatalf("prepared message without id or PSEQ: %+v", m)
		}
	}
	first, err := c.Send(ctx, msgs...)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Send(ctx, msgs...)
	if err != nil {
		t.Fatal(err)
	}
	for i := range first {
		if first[i].QueueOffset != again[i].QueueOffset || first[i].PhysicalOffset != again[i].PhysicalOffset {
			t.Fatalf("message %d: first %+v, again %+v", i, first[i], again[i])
		}
	}
	if max, err := local.Backend.Reader().MaxOffset("prep", 0); err != nil || max != 2 {
		t.Fatalf("queue holds %d messages (%v), want 2", max, err)
	}
}

// TestSequencerWindow: a Send waits while its sequences would be a window
// or more ahead of the oldest outstanding one, and goes when that one is
// released.
func TestSequencerWindow(t *testing.T) {
	s := newSequencer(4)
	ctx := testCtx(t)
	a, _ := s.acquire(ctx, 2) // 0, 1
	b, _ := s.acquire(ctx, 2) // 2, 3
	short, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.acquire(short, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("a fifth outstanding sequence with window 4: %v", err)
	}
	s.release(b) // a still outstanding: nothing moves
	if _, err := s.acquire(short, 1); err == nil {
		t.Fatal("acquired past the oldest outstanding block")
	}
	got := make(chan uint64, 1)
	go func() {
		base, _ := s.acquire(ctx, 3)
		got <- base
	}()
	s.release(a)
	if base := <-got; base != 4 {
		t.Fatalf("next block at %d, want 4", base)
	}
}
