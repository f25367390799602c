package node

import (
	"context"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/raftmq/raftmq/client"
)

// The node's registry names each quantity once, in one unit, per Prometheus
// conventions: the Raft term apart from the Raft indexes, store totals one
// counter each, messages per topic, and the process and Go collectors.
func TestMetricsNamesAndUnits(t *testing.T) {
	c := startCluster(t, 3)
	c.send("a", 5)
	c.send("b", 7)
	l := c.leader()
	cl, err := client.New(context.Background(), []string{l.APIAddr()}, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	prepared := cl.Prepare(client.NewMessage("T", []byte("over gRPC")))
	if _, err := cl.Send(ctx, prepared...); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Send(ctx, prepared...); err != nil { // a retry: answered, not stored
		t.Fatal(err)
	}
	c.assertIdentical()
	pulled := 0
	for q := range int32(8) {
		for _, pull := range []func(context.Context, client.PullRequest) (int, error){
			func(ctx context.Context, r client.PullRequest) (int, error) {
				res, err := cl.Pull(ctx, r)
				return len(res.Messages), err
			},
			func(ctx context.Context, r client.PullRequest) (int, error) { // packed records
				b, err := cl.PullBatch(ctx, r)
				if err != nil {
					return 0, err
				}
				ms, err := b.Messages()
				return len(ms), err
			},
		} {
			n, err := pull(ctx, client.PullRequest{Topic: "T", QueueID: q, MaxMessages: 64})
			if err != nil {
				t.Fatal(err)
			}
			pulled += n
		}
	}
	if pulled != 2*13 {
		t.Fatalf("pulled %d messages in two passes, want 26", pulled)
	}
	got := gather(t, l)
	if v := value(got["raftmq_topic_consumed_messages_total"], "topic", "T"); v != float64(pulled) {
		t.Errorf("raftmq_topic_consumed_messages_total{topic=T} = %v, want %d", v, pulled)
	}
	if v := value(got["raftmq_topic_produced_messages_total"], "topic", "T"); v != 14 {
		t.Errorf("raftmq_topic_produced_messages_total{topic=T} = %v on the leader, want 14 (13 stored, one retry acknowledged)", v)
	}
	if v := value(got["raftmq_dedup_hits_total"], "", ""); v != 1 {
		t.Errorf("raftmq_dedup_hits_total = %v, want 1", v)
	}
	if v := value(got["raftmq_dedup_producers"], "", ""); v < 1 {
		t.Errorf("raftmq_dedup_producers = %v, want ≥ 1", v)
	}
	if m, ok := got["raftmq_store_rebuild_pending"]; !ok || value(m, "", "") != 0 {
		t.Errorf("raftmq_store_rebuild_pending exported %v, value %v, want 0 on undamaged files", ok, value(m, "", ""))
	}
	if m, ok := got["raftmq_corruption_total"]; !ok || value(m, "", "") != 0 {
		t.Errorf("raftmq_corruption_total exported %v, value %v, want 0 on undamaged files", ok, value(m, "", ""))
	}
	if v := value(got["raftmq_raft_term"], "", ""); v < 1 {
		t.Errorf("raftmq_raft_term = %v, want ≥ 1", v)
	}
	for _, m := range got["raftmq_raft_index"].GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == "kind" && lp.GetValue() == "term" {
				t.Error("raftmq_raft_index still carries the term")
			}
		}
	}
	for _, n := range c.nodes {
		if v := value(gather(t, n)["raftmq_store_messages_total"], "", ""); v != 13 {
			t.Errorf("%s: raftmq_store_messages_total = %v, want 13", n.cfg.ID, v)
		}
	}
	for _, name := range []string{"raftmq_store_bytes_total", "raftmq_store_entries_total",
		"raftmq_process_cpu_seconds_total", "raftmq_process_resident_memory_bytes", "go_goroutines", "go_sched_latencies_seconds"} {
		if got[name] == nil {
			t.Errorf("no %s", name)
		}
	}
	kinds := map[string]bool{}
	for _, m := range got["raftmq_commitlog_offset_bytes"].GetMetric() {
		for _, lp := range m.GetLabel() {
			kinds[lp.GetValue()] = true
		}
	}
	for _, k := range []string{"min", "max", "confirm", "flushed", "checkpoint", "touched"} {
		if !kinds[k] {
			t.Errorf("raftmq_commitlog_offset_bytes has no kind=%q", k)
		}
	}
	raftSeries := 0
	for name := range got {
		if strings.HasPrefix(name, "raftmq_raft_") && name != "raftmq_raft_term" && name != "raftmq_raft_index" && name != "raftmq_raft_state" {
			raftSeries++
		}
	}
	if raftSeries == 0 {
		t.Error("no hashicorp/raft metric (raftmq_raft_*) exported")
	}
	if v := sendsOK(got["raftmq_grpc_server_handled_total"]); v < 1 {
		t.Errorf("raftmq_grpc_server_handled_total{grpc_method=Send,grpc_code=OK} = %v, want ≥ 1", v)
	}
	if got["raftmq_store_total"] != nil {
		t.Error("raftmq_store_total (mixed units) is still exported")
	}
}

// sendsOK is the handled count of Send RPCs that ended OK.
func sendsOK(mf *dto.MetricFamily) float64 {
	for _, m := range mf.GetMetric() {
		labels := map[string]string{}
		for _, lp := range m.GetLabel() {
			labels[lp.GetName()] = lp.GetValue()
		}
		if labels["grpc_method"] == "Send" && labels["grpc_code"] == "OK" {
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func gather(t *testing.T, n *Node) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := n.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// value is the counter or gauge value of mf's metric with label name=val
// (any metric when name is ""), or -1.
func value(mf *dto.MetricFamily, name, val string) float64 {
	for _, m := range mf.GetMetric() {
		match := name == ""
		for _, lp := range m.GetLabel() {
			match = match || lp.GetName() == name && lp.GetValue() == val
		}
		if !match {
			continue
		}
		if m.GetCounter() != nil {
			return m.GetCounter().GetValue()
		}
		return m.GetGauge().GetValue()
	}
	return -1
}
