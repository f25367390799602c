package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/nodeproc"
)

// quotaRate is the default per-client produce quota of the quota tests
// (messages per second).
const quotaRate = 200

// quotaRig is a secure 3-node cluster whose [limits] give every client
// quotaRate messages per second, a well-behaved client (one synchronous
// send at a time; its user "steady" has a quota of its own, well above
// what it sends) and a flooding one (8 senders of 50-message batches,
// each resending as soon as it is answered, under the default quota),
// each with its own token.
type quotaRig struct {
	t           testing.TB
	ctx         context.Context
	good, flood *client.Client
	body        []byte
	accepted    atomic.Int64 // flood messages acknowledged
	refused     atomic.Int64 // flood sends refused with RESOURCE_EXHAUSTED
}

func newQuotaRig(t testing.TB, ctx context.Context) *quotaRig {
	pki := newPKI(t, filepath.Join(nodeproc.TempDir(t, "e2e-quota-pki"), "pki"))
	cfg := filepath.Join(pki.dir, "limits.toml")
	limits := "[limits]\nproduce_messages_per_second = " + strconv.Itoa(quotaRate) + "\n"
	if err := os.WriteFile(cfg, []byte(nodeproc.SmallStoreTOML+limits), 0o644); err != nil {
		t.Fatal(err)
	}
	c := startCluster(t, 3, pki.secure(t), func(o *nodeproc.ClusterOptions) { o.Args = []string{"--config", cfg} })
	if err := newClient(t, ctx, c, pki.options(t, "ops")).CreateTopic(ctx, "orders", 4); err != nil {
		t.Fatal(err)
	}
	return &quotaRig{t: t, ctx: ctx, good: newClient(t, ctx, c, pki.options(t, "steady")),
		flood: newClient(t, ctx, c, pki.options(t, "producer")), body: make([]byte, 1024)}
}

// goodRate is the well-behaved client's sends per second over d.
func (r *quotaRig) goodRate(d time.Duration) float64 {
	n := 0
	start := time.Now()
	for time.Since(start) < d {
		if _, err := r.good.Send(r.ctx, client.NewMessage("orders", r.body)); err != nil {
			r.t.Fatalf("well-behaved send: %v", err)
		}
		n++
	}
	return float64(n) / time.Since(start).Seconds()
}

// flooded runs the flood while f runs and returns the flood's acknowledged
// messages per second.
func (r *quotaRig) flooded(f func()) float64 {
	fctx, stop := context.WithCancel(r.ctx)
	var wg sync.WaitGroup
	var failed atomic.Value
	before := r.accepted.Load()
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			batch := make([]client.Message, 50)
			for i := range batch {
				batch[i] = client.NewMessage("orders", r.body)
			}
			for fctx.Err() == nil {
				_, err := r.flood.Send(fctx, batch...)
				switch {
				case err == nil:
					r.accepted.Add(int64(len(batch)))
				case status.Code(err) == codes.ResourceExhausted:
					r.refused.Add(1)
				case fctx.Err() != nil:
				default:
					failed.Store(err)
					return
				}
			}
		}()
	}
	start := time.Now()
	f()
	stop()
	wg.Wait()
	if err := failed.Load(); err != nil {
		r.t.Fatalf("flooding send: %v", err)
	}
	return float64(r.accepted.Load()-before) / time.Since(start).Seconds()
}

// TestQuotaCutsAFlood: under a flood the flooding client is held to its
// quota (acknowledged at most 1.5 × quotaRate messages per second, the
// rest refused with RESOURCE_EXHAUSTED) while the well-behaved client's
// every send is acknowledged. How much the flood slows the well-behaved
// client is measured by BenchmarkQuotaFairness.
func TestQuotaCutsAFlood(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := newQuotaRig(t, ctx)
	var good float64
	flood := r.flooded(func() { good = r.goodRate(3 * time.Second) })
	t.Logf("flood acknowledged %.0f msgs/s (quota %d), refused %d sends; well-behaved %.0f sends/s", flood, quotaRate, r.refused.Load(), good)
	if flood > quotaRate*1.5 {
		t.Errorf("the flood was acknowledged at %.0f msgs/s, quota %d", flood, quotaRate)
	}
	if r.refused.Load() == 0 {
		t.Error("the flood was never refused")
	}
	if good <= 0 {
		t.Error("the well-behaved client sent nothing")
	}
}

// BenchmarkQuotaFairness reports the well-behaved client's throughput
// under a flood as a fraction of its throughput alone (metric
// "fair-ratio", the target is ≥ 0.9): rounds of 3 s alone and under flood
// alternate, b.N pairs, and the ratio is of the medians. Run it on a quiet
// machine: go test -run XXX -bench QuotaFairness -benchtime 5x ./e2e
func BenchmarkQuotaFairness(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	r := newQuotaRig(b, ctx)
	r.goodRate(2 * time.Second) // warm up
	var alone, flooded, floods []float64
	b.ResetTimer()
	for range b.N {
		alone = append(alone, r.goodRate(3*time.Second))
		var good float64
		floods = append(floods, r.flooded(func() { good = r.goodRate(3 * time.Second) }))
		flooded = append(flooded, good)
	}
	b.StopTimer()
	median := func(v []float64) float64 { v = slices.Clone(v); slices.Sort(v); return v[len(v)/2] }
	ratio := median(flooded) / median(alone)
	b.ReportMetric(ratio, "fair-ratio")
	b.ReportMetric(median(alone), "alone-sends/s")
	b.ReportMetric(median(flooded), "flooded-sends/s")
	b.ReportMetric(median(floods), "flood-acked-msgs/s")
	b.Logf("alone %v, under flood %v sends/s; flood acknowledged %v msgs/s, refused %d sends", alone, flooded, floods, r.refused.Load())
}
