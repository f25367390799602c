package clustertest

import (
	"context"
	"testing"
	"time"

	"github.com/raftmq/raftmq/client"
)

// TestFailedTransferKeepsLeaderServing: a leadership transfer that fails
// (here: to a follower that is down) must leave the leader serving. Found
// by TestChaos (-seed=1000, schedule 0): the leader marked itself not ready
// before the transfer and never again, so /healthz and writes failed until
// the next election.
func TestFailedTransferKeepsLeaderServing(t *testing.T) {
	ctx := context.Background()
	tc := mustStartCluster(t, "transfer", clusterOptions{})
	l, err := tc.leader(ctx, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	f := (l + 1) % len(tc.c.Nodes)
	if err := tc.node(f).Kill(); err != nil {
		t.Fatal(err)
	}
	cl := tc.mustClient(t, l)
	tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	err = cl.Transfer(tctx, tc.id(f))
	cancel()
	if err == nil {
		t.Fatalf("transfer to the dead node %s succeeded", tc.id(f))
	}
	t.Logf("transfer to dead %s: %v", tc.id(f), err)
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := tc.node(l).WaitHealthy(hctx); err != nil {
		t.Fatalf("leader %s not serving after a failed transfer: %v", tc.id(l), err)
	}
	sctx, cancel2 := context.WithTimeout(ctx, 10*time.Second)
	defer cancel2()
	if _, err := cl.Send(sctx, client.NewMessage(topic, []byte("after failed transfer"))); err != nil {
		t.Fatalf("write after a failed transfer: %v", err)
	}
}
