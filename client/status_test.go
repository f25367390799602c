package client

import (
	"context"
	"testing"
	"time"

	"github.com/raftmq/raftmq/wire"
)

// With no leader anywhere, Status answers at once with a reachable node's
// view (no leader) instead of retrying a leader read until RetryTimeout:
// `raftmq cluster status` must exit 1 promptly, it is the compose
// healthcheck (found by e2e TestClusterStatusWithoutLeader, which hung).
func TestStatusWithoutLeaderAnswers(t *testing.T) {
	a, b, aAddr, bAddr := cluster(t)
	for i, n := range []*fakeNode{a, b} {
		id := []string{"n1", "n2"}[i]
		n.set(func(f *fakeNode) { f.status = wire.ClusterStatus{ID: id, State: "Follower", Term: 7} })
	}
	c := newClient(t, aAddr, bAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatalf("status without a leader: %v (want a node's view, promptly)", err)
	}
	if st.HasLeader() || st.ID != "n1" || st.Term != 7 {
		t.Fatalf("status %+v, want n1's view without a leader", st)
	}
	// A leader the client knew is gone and no node knows another: the
	// dead leader is forgotten and a node's view returned, promptly.
	dead := deadAddr(t)
	for _, n := range []*fakeNode{a, b} {
		n.set(func(f *fakeNode) { f.status.LeaderID, f.status.LeaderAPIAddr = "n0", dead })
	}
	if _, err := c.resolve(ctx); err != nil || c.leader() != dead {
		t.Fatalf("setup: leader %q %v, want the dead %s", c.leader(), err, dead)
	}
	for _, n := range []*fakeNode{a, b} {
		n.set(func(f *fakeNode) { f.status.LeaderID, f.status.LeaderAPIAddr = "", "" })
	}
	if st, err := c.Status(ctx); err != nil || st.HasLeader() {
		t.Fatalf("status after the leader died: %+v %v (want a node's view, promptly)", st, err)
	}
	// Once a leader is known again, Status is the leader's.
	b.set(func(f *fakeNode) { f.status = wire.ClusterStatus{ID: "n2", LeaderID: "n2", LeaderAPIAddr: bAddr} })
	a.set(func(f *fakeNode) { f.status = wire.ClusterStatus{ID: "n1", LeaderID: "n2", LeaderAPIAddr: bAddr} })
	if st, err := c.Status(ctx); err != nil || st.ID != "n2" {
		t.Fatalf("status with leader n2: %+v %v", st, err)
	}
}
