package e2e_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/testseed"
	"github.com/raftmq/raftmq/store"
)

// TestDelayedDeliveryThroughFaults: three real nodes get 10,000 messages
// with delays spread over 5-30 s. The leader is killed (kill -9) while all
// of them wait, and a follower is killed and restarted while they are being
// delivered. Every message reaches its topic exactly once, never before it
// is due, and 99 % of them within a second of it (by the store time of the
// delivered copy); every node ends holding the same 10,000 copies with
// nothing pending.
func TestDelayedDeliveryThroughFaults(t *testing.T) {
	rng := rand.New(rand.NewPCG(uint64(testseed.Seed(t)), 17))
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const topic, queues, total = "later", 4, 10_000
	cl := newClient(t, ctx, c, client.Options{})
	if err := cl.CreateTopic(ctx, topic, queues); err != nil {
		t.Fatal(err)
	}

	// Send: 100 batches of 100, each message with its own delay.
	due := make(map[string]int64, total)
	start := time.Now()
	for b := 0; b < total/100; b++ {
		msgs := make([]client.Message, 100)
		delays := make([]time.Duration, 100)
		for i := range msgs {
			delays[i] = 5*time.Second + time.Duration(rng.Int64N(int64(25*time.Second)))
			msgs[i] = client.NewMessage(topic, fmt.Appendf(nil, "delayed %d-%d", b, i)).WithDelay(delays[i])
		}
		res, err := cl.Send(ctx, msgs...)
		if err != nil {
			t.Fatalf("send batch %d: %v", b, err)
		}
		for i, r := range res {
			if r.Err != nil || r.Topic != store.ScheduleTopic {
				t.Fatalf("send batch %d message %d: %+v", b, i, r)
			}
			due[r.MsgID] = r.StoreTimestamp + delays[i].Milliseconds()
		}
	}
	t.Logf("%d delayed messages sent in %v", total, time.Since(start).Round(time.Millisecond))
	if len(due) != total {
		t.Fatalf("%d distinct message ids for %d sends", len(due), total)
	}

	// Consume every queue of the topic through the cluster (the leader).
	var mu sync.Mutex
	delivered := map[string]int64{} // msgId → store time of the delivered copy
	dups := 0
	cctx, stopConsumers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for q := int32(0); q < queues; q++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := int64(0)
			for cctx.Err() == nil {
				r, err := cl.Pull(cctx, client.PullRequest{Topic: topic, QueueID: q, Offset: next, MaxMessages: 256, MaxWait: time.Second})
				if err != nil {
					continue // a failover: the client finds the new leader
				}
				mu.Lock()
				for _, m := range r.Messages {
					if _, seen := delivered[m.MsgID]; seen {
						dups++
					}
					delivered[m.MsgID] = m.StoreTimestamp
				}
				mu.Unlock()
				next = r.NextOffset
			}
		}()
	}
	defer func() { stopConsumers(); wg.Wait() }()

	// kill -9 of the leader while every message waits (the first is due 5 s
	// after it was sent).
	old, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Nodes[old].Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Nodes[old].Exited():
	case <-ctx.Done():
		t.Fatal("the killed leader did not exit")
	}
	mu.Lock()
	early := len(delivered)
	mu.Unlock()
	t.Logf("killed leader %s (process gone) %v after the first send; %d delivered before", c.Nodes[old].Spec().ID, time.Since(start).Round(time.Millisecond), early)
	if err := c.Nodes[old].Restart(); err != nil {
		t.Fatal(err)
	}

	// kill -9 and restart of a follower while messages are delivered.
	waitDelivered(t, ctx, &mu, delivered, total/3, "before the follower restart")
	lead, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	follower := (lead + 1) % len(c.Nodes)
	if err := c.Nodes[follower].Kill(); err != nil {
		t.Fatal(err)
	}
	<-c.Nodes[follower].Exited()
	if err := c.Nodes[follower].Restart(); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed and restarted follower %s during delivery", c.Nodes[follower].Spec().ID)

	waitDelivered(t, ctx, &mu, delivered, total, "in all")
	stopConsumers()
	wg.Wait()

	var late []int64
	for id, at := range delivered {
		d, ok := due[id]
		switch {
		case !ok:
			t.Fatalf("delivered %s was never sent", id)
		case at < d:
			t.Fatalf("%s delivered at %d, %d ms before it was due", id, at, d-at)
		}
		late = append(late, at-d)
	}
	if dups != 0 {
		t.Fatalf("%d messages delivered more than once", dups)
	}
	slices.Sort(late)
	p50, p99, worst := late[len(late)/2], late[len(late)*99/100], late[len(late)-1]
	t.Logf("lateness of %d deliveries: p50 %d ms, p99 %d ms, max %d ms", len(late), p50, p99, worst)
	if p99 > 1000 {
		t.Fatalf("p99 lateness %d ms, want ≤ 1 s", p99)
	}

	// Every node holds the same copies, once each, and nothing is pending.
	for i, p := range c.Nodes {
		waitCaughtUp(t, ctx, c, i, lead)
		stored := readAll(t, ctx, p, topic)
		ids := map[string]bool{}
		for _, m := range stored {
			if ids[m.MsgID] || due[m.MsgID] == 0 {
				t.Fatalf("node %s: %s stored twice or never sent", p.Spec().ID, m.MsgID)
			}
			ids[m.MsgID] = true
		}
		if len(ids) != total {
			t.Fatalf("node %s holds %d of %d", p.Spec().ID, len(ids), total)
		}
		body, err := p.Get(ctx, "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(body), "\nraftmq_scheduled_pending_messages 0\n") {
			t.Fatalf("node %s: scheduled messages still pending:\n%s", p.Spec().ID, grepLines(string(body), "raftmq_scheduled"))
		}
	}
}

// waitDelivered waits until n messages were consumed.
func waitDelivered(t *testing.T, ctx context.Context, mu *sync.Mutex, delivered map[string]int64, n int, what string) {
	t.Helper()
	if err := pollUntil(ctx, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(delivered) < n {
			return fmt.Errorf("%d of %d delivered %s", len(delivered), n, what)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
