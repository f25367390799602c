package clustertest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/node"
)

// TestFailover kills the leader with SIGKILL again and again and measures
// the time from the kill to the first write acknowledged through the Go
// client (which must find the new leader by itself). RAFTMQ_FAILOVER_KILLS
// overrides the number of kills (default 20); RAFTMQ_FAILOVER_HEARTBEAT the
// Raft heartbeat and election timeout (default 500ms, the harness's; "shipped"
// runs the node's defaults, lease half of it as they are).
func TestFailover(t *testing.T) {
	kills := 20
	if v, err := strconv.Atoi(os.Getenv("RAFTMQ_FAILOVER_KILLS")); err == nil && v > 0 {
		kills = v
	}
	heartbeat := failoverHeartbeat(t)
	ctx := context.Background()
	tc := mustStartCluster(t, "failover", clusterOptions{heartbeat: heartbeat})
	cl := tc.mustClient(t, 0)
	w := &workload{tc: tc, stop: make(chan struct{})} // a record of sends for the checker
	send := func(seq int) error {
		id := cl.NewMsgID()
		s := &sent{id: id, seq: seq, body: fmt.Appendf(nil, "failover-%d-%s", seq, id)}
		sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		res, err := cl.Send(sctx, client.NewMessage(topic, s.body).WithID(id))
		cancel()
		switch {
		case err == nil && res[0].Err == nil:
			s.outcome, s.queue, s.offset = acked, res[0].QueueID, res[0].QueueOffset
		case err == nil || client.IsOutcomeUnknown(err):
			s.outcome = unknown
		default:
			s.outcome = failed
		}
		w.sends = append(w.sends, s)
		if err == nil {
			err = res[0].Err
		}
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	err := cl.CreateTopic(cctx, topic, queues)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	if err := send(0); err != nil {
		t.Fatalf("first write: %v", err)
	}
	var samples []time.Duration
	for k := 0; k < kills; k++ {
		l, err := tc.leader(ctx, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := tc.node(l).Kill(); err != nil {
			t.Fatal(err)
		}
		var lastErr error
		for attempt := 1; ; attempt++ {
			if lastErr = send(attempt); lastErr == nil {
				break
			}
			if time.Since(start) > 30*time.Second {
				t.Fatalf("kill %d: no write acknowledged within 30s: %v", k+1, lastErr)
			}
		}
		samples = append(samples, time.Since(start))
		if err := tc.restart(l); err != nil {
			t.Fatal(err)
		}
		if err := tc.waitServing(ctx, 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if err := tc.converged(ctx, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	tl := newTally()
	if err := check(ctx, tc, w, tl); err != nil {
		t.Fatal(err)
	}
	_ = verifyStopped(tc, tl)
	if tl.bad() > 0 {
		t.Errorf("%s\n%s", tl, strings.Join(tl.problems, "\n"))
	}
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	var list []string
	for _, s := range samples {
		list = append(list, s.Round(time.Millisecond).String())
	}
	median := (sorted[(len(sorted)-1)/2] + sorted[len(sorted)/2]) / 2
	msg := fmt.Sprintf("failover over %d leader kills (heartbeat/election timeout %v): median %v, max %v; acked=%d unknown=%d failed=%d; samples %s",
		len(samples), heartbeat, median.Round(time.Millisecond), sorted[len(sorted)-1].Round(time.Millisecond),
		tl.Acked, tl.Unknown, tl.Failed, strings.Join(list, " "))
	t.Log(msg)
	fmt.Println(msg)
}

// failoverHeartbeat is the Raft heartbeat and election timeout TestFailover
// runs with (see its doc).
func failoverHeartbeat(t *testing.T) time.Duration {
	switch v := os.Getenv("RAFTMQ_FAILOVER_HEARTBEAT"); v {
	case "":
		return 500 * time.Millisecond
	case "shipped":
		d := node.DefaultConfig().Raft
		if d.HeartbeatTimeout != d.ElectionTimeout || d.LeaderLeaseTimeout != d.HeartbeatTimeout/2 {
			t.Fatalf("the shipped Raft timeouts %+v no longer fit the harness (heartbeat = election, lease = half)", d)
		}
		return d.HeartbeatTimeout
	default:
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("RAFTMQ_FAILOVER_HEARTBEAT=%q: want a duration or \"shipped\"", v)
		}
		return d
	}
}
