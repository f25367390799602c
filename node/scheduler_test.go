package node

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/testseed"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/store"
)

// TestDelayedDeliveryCluster: delayed messages sent to a three-node
// cluster reach their topic once each, not before they are due and within
// a second of it, across a leadership transfer in the middle; the replicas'
// commitlogs stay identical and nothing is left pending.
func TestDelayedDeliveryCluster(t *testing.T) {
	rng := rand.New(rand.NewPCG(uint64(testseed.Seed(t)), 3))
	c := startCluster(t, 3)
	l := c.leader()
	cl, err := client.New(context.Background(), []string{l.APIAddr()}, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.CreateTopic(ctx, "later", 2); err != nil {
		t.Fatal(err)
	}
	const n = 200
	due := map[string]int64{}
	for i := range n {
		delay := time.Duration(200+rng.IntN(2300)) * time.Millisecond
		m := client.NewMessage("later", []byte("m"+strconv.Itoa(i))).WithDelay(delay)
		res, err := cl.Send(ctx, m)
		if err != nil || res[0].Err != nil {
			t.Fatalf("send %d: %v %v", i, err, res)
		}
		if res[0].Topic != store.ScheduleTopic {
			t.Fatalf("send %d: stored in %s, want the schedule topic", i, res[0].Topic)
		}
		due[res[0].MsgID] = res[0].StoreTimestamp + delay.Milliseconds()
		if i == n/2 {
			if err := cl.Transfer(ctx, ""); err != nil {
				t.Fatalf("transfer: %v", err)
			}
		}
	}
	got := map[string]int64{}
	var next [2]int64
	deadline := time.Now().Add(30 * time.Second)
	for len(got) < n && time.Now().Before(deadline) {
		for q := range int32(2) {
			r, err := cl.Pull(ctx, client.PullRequest{Topic: "later", QueueID: q, Offset: next[q], MaxMessages: 64, MaxWait: 200 * time.Millisecond})
			if err != nil {
				t.Fatalf("pull: %v", err)
			}
			for _, m := range r.Messages {
				if _, dup := got[m.MsgID]; dup {
					t.Fatalf("%s delivered twice", m.MsgID)
				}
				got[m.MsgID] = m.StoreTimestamp
				next[q] = m.QueueOffset + 1
			}
		}
	}
	if len(got) != n {
		t.Fatalf("%d of %d delivered in 30 s", len(got), n)
	}
	var worst int64
	for id, at := range got {
		d, ok := due[id]
		switch {
		case !ok:
			t.Fatalf("delivered %s was never sent", id)
		case at < d:
			t.Fatalf("%s delivered at %d, due %d", id, at, d)
		}
		worst = max(worst, at-d)
	}
	if worst > 1000 {
		t.Fatalf("latest delivery %d ms after its due time, want ≤ 1 s", worst)
	}
	t.Logf("%d delayed messages delivered once each, latest %d ms after due", n, worst)
	c.assertIdentical()
	for _, nd := range c.nodes {
		if p := nd.Store().ScheduledPending(); p != 0 {
			t.Fatalf("%s: %d still pending", nd.cfg.ID, p)
		}
	}
	// The delivered copy carries the mark and not the schedule properties.
	r, err := cl.Pull(ctx, client.PullRequest{Topic: "later", QueueID: 0, MaxMessages: 1})
	if err != nil || len(r.Messages) != 1 {
		t.Fatalf("pull: %v", err)
	}
	if _, ok := r.Messages[0].Properties[message.PropertyTimerDelivered]; !ok {
		t.Fatalf("delivered copy without %s: %v", message.PropertyTimerDelivered, r.Messages[0].Properties)
	}
}

// TestSchedulerFollowsItsClock: the scheduler decides what is due by its
// clock (Config.Clock) and stamps DeliverDue with it. With the clock an
// hour ahead, a message delayed by an hour is delivered at the next wake-up
// (a newly scheduled message wakes the scheduler), one delayed by two hours
// is not, until the clock passes it too.
func TestSchedulerFollowsItsClock(t *testing.T) {
	var offset atomic.Int64 // what the fake clock adds to the real one
	c := startClusterWith(t, 1, func(cfg *Config) {
		cfg.Clock = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	})
	l := c.leader()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	send := func(body string, delay time.Duration) store.PutResult {
		t.Helper()
		props, _ := message.EncodeProperties(message.Property{Key: message.PropertyTimerDelayMs, Value: strconv.FormatInt(delay.Milliseconds(), 10)})
		res, err := l.Send(ctx, []message.Message{{Topic: "clock", QueueID: 0, Body: []byte(body), Properties: props}})
		if err != nil || res[0].Err != nil || res[0].Topic != store.ScheduleTopic {
			t.Fatalf("send %s: %v %+v", body, err, res)
		}
		return res[0]
	}
	delivered := func() []string {
		r, err := l.Store().GetMessages("clock", 0, 0, 100, 1<<20, "")
		if err != nil && !errors.Is(err, store.ErrNoSuchTopic) {
			t.Fatal(err)
		}
		var out []string
		for _, m := range r.Messages {
			out = append(out, string(m.Body))
		}
		return out
	}
	a := send("a", time.Hour)
	send("b", 2*time.Hour)
	if got := delivered(); len(got) != 0 || l.Store().ScheduledPending() != 2 {
		t.Fatalf("delivered %v before the clock moved", got)
	}
	offset.Store(int64(time.Hour + time.Second))
	send("c", 10*time.Hour) // wakes the scheduler, which reads its clock
	waitFor(t, "a's delivery by the clock an hour ahead", 10*time.Second, func() bool { return len(delivered()) == 1 })
	if got := delivered(); got[0] != "a" || l.Store().ScheduledPending() != 2 {
		t.Fatalf("delivered %v, %d pending; want a, then b and c pending", got, l.Store().ScheduledPending())
	}
	r, _ := l.Store().GetMessages("clock", 0, 0, 1, 1<<20, "")
	if at := r.Messages[0].StoreTimestamp; at < a.StoreTimestamp+time.Hour.Milliseconds() {
		t.Fatalf("a delivered at %d, before its due time %d", at, a.StoreTimestamp+time.Hour.Milliseconds())
	}
	offset.Store(int64(2*time.Hour + time.Second))
	send("d", 10*time.Hour)
	waitFor(t, "b's delivery", 10*time.Second, func() bool { return len(delivered()) == 2 })
	if got := delivered(); got[1] != "b" || l.Store().ScheduledPending() != 2 {
		t.Fatalf("delivered %v, %d pending; want a b, then c and d pending", got, l.Store().ScheduledPending())
	}
}
