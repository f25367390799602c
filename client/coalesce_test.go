package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/wire"
)

// gatedLeader is a one-node cluster whose Sends wait for the returned gate
// to close, and a client allowing inFlight Send RPCs.
func gatedLeader(t *testing.T, inFlight int) (*fakeNode, *Client, chan struct{}) {
	t.Helper()
	gate := make(chan struct{})
	n := &fakeNode{gate: gate}
	addr := serve(t, n)
	n.set(func(f *fakeNode) { f.status = wire.ClusterStatus{ID: "n1", LeaderID: "n1", LeaderAPIAddr: addr} })
	c, err := New(testCtx(t), []string{addr}, Options{Backoff: time.Millisecond, MaxSendsInFlight: inFlight})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return n, c, gate
}

// heldLeader is gatedLeader allowing one Send RPC in flight, with one Send
// already held at the gate: the next Sends queue in the client.
func heldLeader(t *testing.T) (*fakeNode, *Client, chan struct{}, context.Context, *sync.WaitGroup) {
	t.Helper()
	n, c, gate := gatedLeader(t, 1)
	ctx := testCtx(t)
	wg := new(sync.WaitGroup)
	sendAsync(ctx, c, wg, Message{Topic: "T", Body: []byte("first")})
	waitSends(t, n, 1)
	return n, c, gate, ctx, wg
}

// waitQueued waits (bounded) until n Sends wait in c's queue.
func waitQueued(t *testing.T, c *Client, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.sends.mu.Lock()
		got := len(c.sends.queue)
		c.sends.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d Sends queued, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

type sendOutcome struct {
	ids     []string
	results []SendResult
	err     error
}

// sendAsync starts a Send of msgs and returns where its outcome arrives.
func sendAsync(ctx context.Context, c *Client, wg *sync.WaitGroup, msgs ...Message) <-chan sendOutcome {
	out := make(chan sendOutcome, 1)
	ids := make([]string, len(msgs))
	for i := range msgs {
		msgs[i].ID = c.NewMsgID()
		ids[i] = msgs[i].ID
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		res, err := c.Send(ctx, msgs...)
		out <- sendOutcome{ids: ids, results: res, err: err}
	}()
	return out
}

// TestConcurrentSendsMerge: with one RPC allowed in flight, the Sends that
// arrive meanwhile leave as one RPC, and each caller gets exactly the
// results of its own messages.
func TestConcurrentSendsMerge(t *testing.T) {
	n, c, gate := gatedLeader(t, 1)
	ctx := testCtx(t)
	var wg sync.WaitGroup
	first := sendAsync(ctx, c, &wg, Message{Topic: "T", Body: []byte("first")})
	waitSends(t, n, 1)
	var outs []<-chan sendOutcome
	for i := range 99 {
		msgs := make([]Message, 1+i%3)
		for j := range msgs {
			msgs[j] = Message{Topic: "T", Body: fmt.Appendf(nil, "%d-%d", i, j)}
		}
		outs = append(outs, sendAsync(ctx, c, &wg, msgs...))
	}
	waitQueued(t, c, 99)
	close(gate)
	wg.Wait()
	if o := <-first; o.err != nil || len(o.results) != 1 {
		t.Fatalf("first send: %v %v", o.results, o.err)
	}
	total := 0
	seen := map[int64]bool{}
	for i, ch := range outs {
		o := <-ch
		if o.err != nil {
			t.Fatalf("send %d: %v", i, o.err)
		}
		if len(o.results) != len(o.ids) {
			t.Fatalf("send %d: %d results for %d messages", i, len(o.results), len(o.ids))
		}
		for j, r := range o.results {
			if r.MsgID != o.ids[j] || seen[r.QueueOffset] {
				t.Fatalf("send %d message %d: result %+v (id %s)", i, j, r, o.ids[j])
			}
			seen[r.QueueOffset] = true
		}
		total += len(o.ids)
	}
	if got := n.Batches(); !slices.Equal(got, []int{1, total}) {
		t.Fatalf("server saw batches %v, want [1 %d]: the queued Sends were not merged into one", got, total)
	}
}

// TestMergedInvalidSentAlone: one caller's invalid message refuses the
// merged request; each Send is then sent alone and only the bad one fails.
func TestMergedInvalidSentAlone(t *testing.T) {
	n, c, gate, ctx, wg := heldLeader(t)
	good1 := sendAsync(ctx, c, wg, Message{Topic: "T", Body: []byte("a")})
	bad := sendAsync(ctx, c, wg, Message{Topic: "bad topic!", Body: []byte("b")})
	good2 := sendAsync(ctx, c, wg, Message{Topic: "T", Body: []byte("c")})
	waitQueued(t, c, 3)
	close(gate)
	wg.Wait()
	for name, ch := range map[string]<-chan sendOutcome{"good1": good1, "good2": good2} {
		if o := <-ch; o.err != nil || len(o.results) != 1 {
			t.Errorf("%s: %v %v", name, o.results, o.err)
		}
	}
	if o := <-bad; !errors.Is(o.err, ErrInvalid) {
		t.Errorf("bad topic: %v, want ErrInvalid", o.err)
	}
	if got := n.Batches(); !slices.Equal(got, []int{1, 1, 1}) {
		t.Errorf("server stored batches %v, want [1 1 1]", got)
	}
}

// TestQueuedSendWithdrawn: a caller whose context ends while its Send
// waits in the queue gets the context's error, and nothing of it is sent.
func TestQueuedSendWithdrawn(t *testing.T) {
	n, c, gate, ctx, wg := heldLeader(t)
	short, cancel := context.WithCancel(ctx)
	gone := sendAsync(short, c, wg, Message{Topic: "T", Body: []byte("withdrawn")})
	waitQueued(t, c, 1)
	cancel()
	if o := <-gone; !errors.Is(o.err, context.Canceled) {
		t.Fatalf("withdrawn send: %v, want context.Canceled", o.err)
	}
	waitQueued(t, c, 0)
	close(gate)
	wg.Wait()
	if got := n.Batches(); !slices.Equal(got, []int{1}) {
		t.Fatalf("server saw batches %v, want only the first", got)
	}
}

// waitSends waits (bounded) until n has received want Send calls.
func waitSends(t *testing.T, n *fakeNode, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for n.Sends() < want {
		if time.Now().After(deadline) {
			t.Fatalf("server got %d Sends, want %d", n.Sends(), want)
		}
		time.Sleep(time.Millisecond)
	}
}
