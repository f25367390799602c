package node

import (
	"context"
	"math/rand/v2"
	"strconv"
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
