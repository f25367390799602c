package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestQuickRun runs the whole bench in -quick mode (real processes: three
// raftmq nodes, three ceiling nodes, the CLI) and checks that every row was
// measured and that both reports parse. It asserts no speeds.
func TestQuickRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts six node processes; skipped with -short")
	}
	o := defaultOptions(true)
	o.Out, o.Log, o.Args = t.TempDir(), testLog{t}, []string{"-quick"}
	// Building the binaries alone took 107 s in a CI run that compiled
	// other packages beside it; the scan step builds the store's tests.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := run(ctx, o); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(o.Out, "performance.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("performance.json does not parse: %v", err)
	}
	checkRows(t, &rep)
	md, err := os.ReadFile(filepath.Join(o.Out, "performance.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| row | log store | raftmq | ceiling | ratio | target | result |", rep.Machine.CPU, "go run ./bench -quick"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("performance.md lacks %q", want)
		}
	}
	if n := strings.Count(string(md), "\n| "); n < len(rep.Rows) {
		t.Errorf("performance.md has %d table lines for %d rows", n, len(rep.Rows))
	}
}

func checkRows(t *testing.T, rep *report) {
	t.Helper()
	want := map[string]bool{"produce 1 KiB": false, "produce 16 KiB": false, "pipelined": false, "async producers": false,
		"single synchronous send": false, "p99 at half max": false, "consume catch-up": false, "restart": false,
		"abnormal recovery: verifying scan": false}
	var acked int64
	for _, r := range rep.Rows {
		for k := range want {
			if strings.Contains(r.Name, k) {
				want[k] = true
			}
		}
		if r.Result != "pass" && r.Result != "miss" && r.Result != "info" {
			t.Errorf("row %q: result %q", r.Name, r.Result)
		}
		if r.Load != nil && r.Load.Rate == 0 && (len(r.RaftmqRuns) != rep.Reps || len(r.CeilingRuns) != rep.Reps) {
			t.Errorf("row %q: %d raftmq and %d ceiling runs, want %d each", r.Name, len(r.RaftmqRuns), len(r.CeilingRuns), rep.Reps)
		}
		for _, s := range r.RaftmqRuns {
			acked += s.Count
			if strings.HasPrefix(r.Name, "produce") && s.Count > 0 && (len(s.DiskBytes) != 3 || s.WriteAmp <= 0) {
				t.Errorf("row %q: no write amplification measured: disk bytes %v, amp %v", r.Name, s.DiskBytes, s.WriteAmp)
			}
		}
		if strings.Contains(r.Name, "p99 at half max") && (len(r.RaftmqRuns) != rep.Reps || len(r.CeilingRuns) != rep.Reps || r.Ceiling <= 0) {
			t.Errorf("half-max row: %d raftmq and %d ceiling runs (want %d each), ceiling p99 %v", len(r.RaftmqRuns), len(r.CeilingRuns), rep.Reps, r.Ceiling)
		}
		if strings.Contains(r.Name, "single synchronous send") && r.RoundTripMs <= 0 {
			t.Errorf("synchronous row without the client's round trip: %+v", r)
		}
		if strings.Contains(r.Name, "consume") && r.Raftmq <= 0 {
			t.Errorf("consume row read nothing: %+v", r)
		}
		if strings.Contains(r.Name, "restart") && r.Raftmq <= 0 {
			t.Errorf("restart row measured nothing: %+v", r)
		}
	}
	for k, ok := range want {
		if !ok {
			t.Errorf("no row for %q", k)
		}
	}
	if acked == 0 {
		t.Error("no raftmq run acknowledged a message")
	}
}

// TestJudges checks the write-path targets on made-up rows: throughput ratio
// and write amplification on every produce row, the tail on saturating
// rows, and the async row against the batched row.
func TestJudges(t *testing.T) {
	run := func(msgs, p50, p99, amp float64) Summary {
		return Summary{MsgsPerS: msgs, P50: p50, P99: p99, WriteAmp: amp}
	}
	row := func(l load, mq, ceil Summary) Row {
		return Row{Load: &l, Raftmq: mq.MsgsPerS, Ceiling: ceil.MsgsPerS, RaftmqRuns: []Summary{mq}, CeilingRuns: []Summary{ceil}}
	}
	for _, tc := range []struct {
		name  string
		judge func(*Row)
		mq    Summary
		want  string
	}{
		{"fast and lean", judgeProduce, run(900, 1, 5, 2.4), "pass"},
		{"too slow", judgeProduce, run(700, 1, 5, 2.4), "miss"},
		{"too many disk bytes", judgeProduce, run(900, 1, 5, 2.6), "miss"},
		{"write amplification unmeasured", judgeProduce, run(900, 1, 5, 0), "miss"},
		{"saturated, tight tail", judgeSaturated, run(900, 10, 150, 2), "pass"},
		{"saturated, long tail", judgeSaturated, run(900, 10, 250, 2), "miss"},
	} {
		r := row(pipelinedLoad, tc.mq, run(1000, 1, 1, 1))
		tc.judge(&r)
		if r.Result != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.name, r.Result, r.Target, tc.want)
		}
	}
	for _, tc := range []struct {
		async float64
		want  string
	}{{950, "pass"}, {850, "miss"}} {
		rows := []Row{row(pipelinedLoad, run(1000, 1, 5, 2), run(1000, 1, 1, 1)), row(asyncLoad, run(tc.async, 1, 5, 2), run(tc.async, 1, 1, 1))}
		for i := range rows {
			judgeSaturated(&rows[i])
		}
		judgeAsyncVsBatched(rows)
		if rows[1].Result != tc.want {
			t.Errorf("async at %.0f vs batched 1000: %s, want %s (%s)", tc.async, rows[1].Result, tc.want, rows[1].Note)
		}
	}
}

// TestJudgeSyncFloor: the synchronous row notes the median round trip and
// what ceiling + round trip is as a ratio; its verdict stays judgeSync's.
func TestJudgeSyncFloor(t *testing.T) {
	l := syncLoad
	r := Row{Load: &l, Raftmq: 1.0, Ceiling: 0.5}
	judgeSync(&r)
	judgeSyncFloor(&r, []float64{0.3, 0.1, 0.2})
	if r.RoundTripMs != 0.2 || !strings.Contains(r.Note, "p50 0.20 ms") || !strings.Contains(r.Note, "1.40 × the ceiling") || r.Result != "miss" {
		t.Errorf("round trip %v, result %s, note %q", r.RoundTripMs, r.Result, r.Note)
	}
	empty := Row{Load: &l, Raftmq: 1.0, Ceiling: 0.5}
	judgeSyncFloor(&empty, nil)
	if empty.RoundTripMs != 0 || empty.Note != "" {
		t.Errorf("no round trips measured, yet %+v", empty)
	}
}

// TestBlockedStacks summarizes a SIGQUIT dump: goroutines grouped by
// stack, those waiting for the network left out.
func TestBlockedStacks(t *testing.T) {
	dump := `SIGQUIT: quit
PC=0x1 m=0 sigcode=0

goroutine 1 [IO wait]:
internal/poll.runtime_pollWait(0xc000)
	/x/netpoll.go:1 +0x1

goroutine 7 [chan receive, 3 minutes]:
github.com/raftmq/raftmq/client.(*Client).write(0xc000)
	/x/client.go:130 +0x1
main.benchSendBatch(0xc000)
	/x/bench.go:1 +0x1

goroutine 8 [chan receive, 3 minutes]:
github.com/raftmq/raftmq/client.(*Client).write(0xc001)
	/x/client.go:130 +0x1
main.benchSendBatch(0xc002)
	/x/bench.go:1 +0x1

goroutine 10 [select]:
google.golang.org/grpc.(*ccBalancerWrapper).watcher(0xc000)
	/x/b.go:1 +0x1
`
	got := blockedStacks(dump, 10)
	want := "  2× [chan receive, 3 minutes] github.com/raftmq/raftmq/client.(*Client).write < main.benchSendBatch\n" +
		"  1× [select] google.golang.org/grpc.(*ccBalancerWrapper).watcher\n"
	if got != want {
		t.Fatalf("blockedStacks:\n%s\nwant:\n%s", got, want)
	}
	if got := blockedStacks(dump, 1); !strings.HasSuffix(got, "  ... 1 more\n") {
		t.Fatalf("max 1: %q", got)
	}
}

// TestProfileGroups summarizes a pprof debug=1 goroutine profile.
func TestProfileGroups(t *testing.T) {
	profile := "goroutine profile: total 1203\n" +
		"1200 @ 0x1 0x2\n" +
		"#\t0x1\tgoogle.golang.org/grpc/internal/transport.(*recvBufferReader).read+0x85\t/x/transport.go:1\n" +
		"#\t0x2\tgoogle.golang.org/grpc.(*Server).processUnaryRPC+0x1f\t/x/server.go:2\n" +
		"\n" +
		"3 @ 0x3\n" +
		"#\t0x3\tgithub.com/raftmq/raftmq/node.(*batcher).next+0x10\t/x/batcher.go:3\n"
	want := "goroutine profile: total 1203\n" +
		"  1200× google.golang.org/grpc/internal/transport.(*recvBufferReader).read < google.golang.org/grpc.(*Server).processUnaryRPC\n" +
		"  3× github.com/raftmq/raftmq/node.(*batcher).next\n"
	if got := profileGroups(profile, 5); got != want {
		t.Fatalf("profileGroups:\n%s\nwant:\n%s", got, want)
	}
	if got := profileGroups(profile, 1); !strings.HasSuffix(got, "  ...\n") {
		t.Fatalf("max 1: %q", got)
	}
}

// TestProcessCPU: the restart matrix's quiet check reads a process's CPU
// time from /proc; burning CPU in this process must show in it.
func TestProcessCPU(t *testing.T) {
	before, err := processCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	var x uint64
	for start := time.Now(); time.Since(start) < 200*time.Millisecond; {
		for i := 0; i < 1000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	after, err := processCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after-before < 50*time.Millisecond {
		t.Fatalf("CPU time went from %v to %v over 200 ms of spinning (x=%d)", before, after, x)
	}
}
