package e2e_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/nodeproc"
)

// BenchmarkScheduledIdleCPU measures what a million pending delayed
// messages cost a node that has nothing else to do: the node's CPU time
// (utime+stime of its process, /proc/PID/stat) over an idle window, first
// with nothing stored, then with 1,000,000 messages scheduled an hour ahead.
// It reports both as CPU milliseconds per second of wall time.
//
//	go test -run XXX -bench ScheduledIdleCPU -benchtime 1x ./e2e
func BenchmarkScheduledIdleCPU(b *testing.B) {
	for range b.N {
		c := startCluster(b, 1)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		cl := newClient(b, ctx, c, client.Options{})
		if err := cl.CreateTopic(ctx, "idle", 4); err != nil {
			b.Fatal(err)
		}
		node := c.Nodes[0]
		const window = 30 * time.Second
		before := idleCPU(b, node, window)
		const total, batch, workers = 1_000_000, 1000, 4
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := w; k < total/batch; k += workers {
					msgs := make([]client.Message, batch)
					for i := range msgs {
						msgs[i] = client.NewMessage("idle", []byte("later")).WithDelay(time.Hour)
					}
					if _, err := cl.Send(ctx, msgs...); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
		b.Logf("%d messages scheduled an hour ahead in %v", total, time.Since(start).Round(time.Millisecond))
		metrics, err := node.Get(ctx, "/metrics")
		if err != nil || !strings.Contains(string(metrics), fmt.Sprintf("\nraftmq_scheduled_pending_messages %d\n", total)) &&
			!strings.Contains(string(metrics), "\nraftmq_scheduled_pending_messages 1e+06\n") {
			b.Fatalf("pending gauge does not say %d: %v\n%s", total, err, grepLines(string(metrics), "raftmq_scheduled"))
		}
		// Let the write path settle (flush, checkpoint) before measuring.
		time.Sleep(5 * time.Second)
		after := idleCPU(b, node, window)
		b.ReportMetric(before, "idle-cpu-ms/s")
		b.ReportMetric(after, "pending-1e6-cpu-ms/s")
		b.Logf("idle node: %.2f CPU ms/s empty, %.2f CPU ms/s with %d pending (%.2f %% of one core)", before, after, total, after/10)
		cancel()
	}
}

// idleCPU is the CPU time p's process used per second of wall time over d.
func idleCPU(b *testing.B, p *nodeproc.Proc, d time.Duration) float64 {
	b.Helper()
	t0, c0 := time.Now(), procCPU(b, p.PID())
	time.Sleep(d) // the measurement window
	t1, c1 := time.Now(), procCPU(b, p.PID())
	return float64((c1 - c0).Milliseconds()) / t1.Sub(t0).Seconds()
}

// procCPU is utime+stime of pid (fields 14 and 15 of /proc/PID/stat, in
// clock ticks of 10 ms).
func procCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // after "pid (comm) "
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("parse %s: %v %v", s, err1, err2)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond
}
