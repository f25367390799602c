package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/raftmq/raftmq/internal/nodeproc"
	"github.com/raftmq/raftmq/node"
)

// Targets. The write path: every produce row at ≥ 0.8 × the bare Raft
// ceiling with the same log store and settings, with at most 2.5 disk bytes
// written per body byte by the busiest node; async single messages at ≥ 0.9
// × the client-batched row (batching is the server's job); p99 ≤ 20 × p50
// at saturation; a single synchronous send's p50 ≤ 1.2 × the ceiling's.
const (
	targetProduceRatio   = 0.80  // raftmq / ceiling, MB/s or msgs/s
	targetWriteAmp       = 2.5   // disk bytes per body byte, per node
	targetAsyncVsBatched = 0.90  // async single messages / client batches, msgs/s
	targetSaturationTail = 20.0  // p99 / p50 of a saturating row
	targetSyncP50Ratio   = 1.20  // raftmq p50 / ceiling p50, one synchronous sender
	targetHalfMaxP99     = 10.0  // ms
	targetConsumeMBps    = 500.0 // MB/s of message bytes
	targetRestartSecs    = 2.0   // s to serving with 1 GiB
)

// Row is one line of the report.
type Row struct {
	Name        string    `json:"name"`
	LogStore    string    `json:"log_store"`
	Load        *load     `json:"load,omitempty"`
	Metric      string    `json:"metric"`
	Raftmq      float64   `json:"raftmq"`
	Ceiling     float64   `json:"ceiling,omitempty"`
	RoundTripMs float64   `json:"round_trip_ms,omitempty"` // synchronous row: see rpcRoundTrip
	Ratio       float64   `json:"ratio,omitempty"`
	Target      string    `json:"target"`
	Result      string    `json:"result"` // pass, miss or info
	RaftmqRuns  []Summary `json:"raftmq_runs,omitempty"`
	CeilingRuns []Summary `json:"ceiling_runs,omitempty"`
	Note        string    `json:"note,omitempty"`
}

// abRow is a row measured on both clusters.
type abRow struct {
	name   string
	l      load
	metric string                  // what Raftmq/Ceiling hold
	value  func(s Summary) float64 // of one run
	judge  func(row *Row)          // sets Ratio, Target, Result
}

func mbps(s Summary) float64 { return s.MBPerS }
func msgs(s Summary) float64 { return s.MsgsPerS }
func p50(s Summary) float64  { return s.P50 }
func p99(s Summary) float64  { return s.P99 }

func writeAmp(s Summary) float64 { return s.WriteAmp }

// judgeProduce: throughput ratio and write amplification.
func judgeProduce(row *Row) {
	row.Ratio = ratio(row.Raftmq, row.Ceiling)
	wa := median(row.RaftmqRuns, writeAmp)
	row.Target = fmt.Sprintf("ratio ≥ %.2f, write amp ≤ %.1f", targetProduceRatio, targetWriteAmp)
	// An unmeasured write amplification (0) cannot pass.
	row.Result = passIf(row.Ratio >= targetProduceRatio && wa > 0 && wa <= targetWriteAmp)
}

// judgeSaturated adds the tail target to judgeProduce for the rows that keep
// the cluster saturated (many sends in flight).
func judgeSaturated(row *Row) {
	judgeProduce(row)
	tail := ratio(median(row.RaftmqRuns, p99), median(row.RaftmqRuns, p50))
	row.Target += fmt.Sprintf(", p99 ≤ %.0f × p50", targetSaturationTail)
	if row.Result == "pass" {
		row.Result = passIf(tail > 0 && tail <= targetSaturationTail)
	}
	row.Note = strings.TrimSpace(fmt.Sprintf("%s p99/p50 %.1f.", row.Note, tail))
}

// judgeAsyncVsBatched compares the async single-message row with the
// client-batched row of the same run (both msgs/s).
func judgeAsyncVsBatched(rows []Row) {
	var async, batched *Row
	for i := range rows {
		switch {
		case rows[i].Load == nil:
		case *rows[i].Load == asyncLoad:
			async = &rows[i]
		case *rows[i].Load == pipelinedLoad:
			batched = &rows[i]
		}
	}
	if async == nil || batched == nil {
		return
	}
	vs := ratio(async.Raftmq, batched.Raftmq)
	async.Target += fmt.Sprintf(", ≥ %.2f × the batched row", targetAsyncVsBatched)
	async.Note = strings.TrimSpace(fmt.Sprintf("%s %.2f × the batched row.", async.Note, vs))
	if async.Result == "pass" {
		async.Result = passIf(vs >= targetAsyncVsBatched)
	}
}

func judgeSync(row *Row) {
	row.Ratio = ratio(row.Raftmq, row.Ceiling)
	row.Target = fmt.Sprintf("p50 ratio ≤ %.2f", targetSyncP50Ratio)
	row.Result = passIf(row.Ratio > 0 && row.Ratio <= targetSyncP50Ratio)
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func passIf(ok bool) string {
	if ok {
		return "pass"
	}
	return "miss"
}

// pipelinedLoad mirrors client.Producer's defaults: batches of 128, four
// sends in flight per producer. asyncLoad is the same four producers
// sending single messages with 500 in flight each: the server must batch.
var (
	pipelinedLoad = load{Size: 1024, Conc: 4, Batch: 128, InFlight: 4}
	asyncLoad     = load{Size: 1024, Conc: 4, Batch: 1, InFlight: 500}
	syncLoad      = load{Size: 1024, Conc: 1, Batch: 1, InFlight: 1}
)

func abRows(quick bool) []abRow {
	concs := []int{1, 16, 128}
	if quick {
		concs = []int{16}
	}
	var rows []abRow
	for _, size := range []int{1024, 16 << 10} {
		batched := 32
		if size > 1024 {
			batched = 8
		}
		for _, c := range concs {
			for _, b := range []int{1, batched} {
				kind := "unbatched"
				if b > 1 {
					kind = fmt.Sprintf("batch %d", b)
				}
				rows = append(rows, abRow{name: fmt.Sprintf("produce %s, %d producers, %s", sizeName(size), c, kind),
					l: load{Size: size, Conc: c, Batch: b, InFlight: 1}, metric: "MB/s", value: mbps, judge: judgeProduce})
			}
		}
	}
	rows = append(rows,
		abRow{name: "produce 1 KiB, 4 pipelined producers (batch 128, 4 in flight)", l: pipelinedLoad,
			metric: "msgs/s", value: msgs, judge: judgeSaturated},
		abRow{name: "produce 1 KiB, 4 async producers (single messages, 500 in flight)", l: asyncLoad,
			metric: "msgs/s", value: msgs, judge: judgeSaturated},
		abRow{name: "single synchronous send, 1 KiB (p50)", l: syncLoad,
			metric: "p50 ms", value: p50, judge: judgeSync})
	return rows
}

// sizeName writes n bytes in the largest binary unit that divides it.
func sizeName[N int | int64](n N) string {
	for _, u := range []struct {
		size N
		name string
	}{{1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d %s", n/u.size, u.name)
		}
	}
	return fmt.Sprintf("%d B", n)
}

// all runs every row.
func (r *runner) all(ctx context.Context, rep *report) error {
	if err := r.startClusters(ctx, node.LogStoreWAL); err != nil {
		return err
	}
	r.warmUp(ctx)
	rows, err := r.runAB(ctx, r.o.filter(abRows(r.o.Quick)))
	if err != nil {
		return err
	}
	rep.Rows = append(rep.Rows, rows...)
	var maxRate float64
	for _, row := range rows {
		if row.Load != nil && *row.Load == pipelinedLoad {
			maxRate = row.Raftmq
		}
	}
	for _, step := range []struct {
		name string
		fn   func(context.Context, *report) error
	}{
		{"halfmax", func(ctx context.Context, rep *report) error { return r.halfMax(ctx, rep, maxRate) }},
		{"profile", r.profiles}, {"consume", r.consume}, {"restart", r.restart}, {"restarts", r.restartMatrix}, {"scan", r.scan}, {"baseline", r.baseline},
	} {
		if !r.o.step(step.name) {
			continue
		}
		if err := step.fn(ctx, rep); err != nil {
			return err
		}
	}
	if !r.o.Bolt {
		return nil
	}
	return r.boltRows(ctx, rep)
}

// runAB measures every row reps times, alternating which cluster goes
// first, and keeps the medians.
func (r *runner) runAB(ctx context.Context, defs []abRow) ([]Row, error) {
	rows := make([]Row, len(defs))
	for i, d := range defs {
		l := d.l
		rows[i] = Row{Name: d.name, LogStore: r.variant, Load: &l, Metric: d.metric}
	}
	var roundTrips []float64 // ms, one per repetition of the synchronous row
	for rep := 0; rep < r.o.Reps; rep++ {
		for i, d := range defs {
			mqFirst := (rep+i)%2 == 0
			for k := 0; k < 2; k++ {
				var s Summary
				var err error
				if (k == 0) == mqFirst {
					s, err = r.produce(ctx, d.l, r.o.Duration)
					rows[i].RaftmqRuns = append(rows[i].RaftmqRuns, s)
				} else {
					s, err = r.ceiling(ctx, d.l, r.o.Duration)
					rows[i].CeilingRuns = append(rows[i].CeilingRuns, s)
				}
				if err != nil {
					return nil, fmt.Errorf("%s: %w", d.name, err)
				}
			}
			r.logf("%-62s raftmq %9.1f  ceiling %9.1f %s", d.name, d.value(last(rows[i].RaftmqRuns)), d.value(last(rows[i].CeilingRuns)), d.metric)
			if d.l == syncLoad {
				rt, err := r.rpcRoundTrip(ctx)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", d.name, err)
				}
				roundTrips = append(roundTrips, rt)
				r.logf("%-62s client→leader round trip p50 %.2f ms", d.name, rt)
			}
		}
	}
	for i, d := range defs {
		rows[i].Raftmq = median(rows[i].RaftmqRuns, d.value)
		rows[i].Ceiling = median(rows[i].CeilingRuns, d.value)
		rows[i].Note = errorNote(rows[i].RaftmqRuns, rows[i].CeilingRuns)
		d.judge(&rows[i])
		if d.l == syncLoad {
			judgeSyncFloor(&rows[i], roundTrips)
		}
	}
	judgeAsyncVsBatched(rows)
	return rows, nil
}

func last(s []Summary) Summary { return s[len(s)-1] }

func median(runs []Summary, f func(Summary) float64) float64 {
	if len(runs) == 0 {
		return 0
	}
	v := make([]float64, len(runs))
	for i, s := range runs {
		v[i] = f(s)
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func errorNote(sets ...[]Summary) string {
	var n int64
	first := ""
	for _, runs := range sets {
		for _, s := range runs {
			n += s.Errors
			if first == "" && s.FirstErr != "" {
				first = s.FirstErr
			}
		}
	}
	if n == 0 && first == "" {
		return ""
	}
	if len(first) > 200 {
		first = first[:200] + "…"
	}
	return fmt.Sprintf("%d errors; first: %s", n, first)
}

// halfMax runs the pipelined load open loop at half the rate it reached
// closed loop; latency counts from each batch's intended send time.
func (r *runner) halfMax(ctx context.Context, rep *report, maxRate float64) error {
	l := pipelinedLoad
	l.Rate = maxRate / 2
	row := Row{Name: fmt.Sprintf("p99 at half max throughput (open loop, %.0f msgs/s)", l.Rate), LogStore: r.variant,
		Load: &l, Metric: "p99 ms", Target: fmt.Sprintf("p99 ≤ %.0f ms", targetHalfMaxP99)}
	if l.Rate < 1 {
		row.Result, row.Note = "miss", "no maximum throughput measured"
		rep.Rows = append(rep.Rows, row)
		return nil
	}
	// The ceiling runs the same open loop (one entry per batch, as many
	// appliers as sends in flight): bare Raft's own p99 at this rate on
	// this disk, the floor for the row. raftmq and the ceiling alternate.
	for rep := range r.o.Reps {
		for k := range 2 {
			if (k == 0) == (rep%2 == 0) {
				s, err := r.produce(ctx, l, r.o.Duration)
				if err != nil {
					return err
				}
				row.RaftmqRuns = append(row.RaftmqRuns, s)
				r.logf("%-62s raftmq p99 %.2f ms (p50 %.2f, %.0f msgs/s)", row.Name, s.P99, s.P50, s.MsgsPerS)
				continue
			}
			s, err := r.ceiling(ctx, l, r.o.Duration)
			if err != nil {
				return err
			}
			row.CeilingRuns = append(row.CeilingRuns, s)
			r.logf("%-62s ceiling p99 %.2f ms (p50 %.2f, %.0f msgs/s)", row.Name, s.P99, s.P50, s.MsgsPerS)
		}
	}
	row.Raftmq, row.Ceiling = median(row.RaftmqRuns, p99), median(row.CeilingRuns, p99)
	row.Ratio = ratio(row.Raftmq, row.Ceiling)
	row.Result = passIf(row.Raftmq <= targetHalfMaxP99)
	row.Note = strings.TrimSpace(fmt.Sprintf("%s The ceiling at the same open-loop rate: p99 %.2f ms, p50 %.2f ms.",
		errorNote(row.RaftmqRuns, row.CeilingRuns), row.Ceiling, median(row.CeilingRuns, p50)))
	rep.Rows = append(rep.Rows, row)
	return nil
}

// profiles captures CPU profiles of the raftmq leader under the pipelined
// load and the consume catch-up (extra runs, not counted in any row).
func (r *runner) profiles(ctx context.Context, rep *report) error {
	if !r.o.Profile {
		return nil
	}
	file := filepath.Join(r.work, "leader-pipelined.pprof")
	err := r.leaderProfile(ctx, r.o.Duration, file, func() error {
		_, err := r.produce(ctx, pipelinedLoad, r.o.Duration+time.Second)
		return err
	})
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	rep.Profiles = append(rep.Profiles, profileTop(ctx, "raftmq leader, pipelined produce (1 KiB, 4×4 in flight, batch 128)", file))
	return nil
}

// profileTop is `go tool pprof -top` of file, cut to its head.
func profileTop(ctx context.Context, title, file string) Profile {
	out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=25", file).CombinedOutput()
	text := string(out)
	if err != nil {
		text = fmt.Sprintf("go tool pprof failed: %v\n%s", err, out)
	}
	return Profile{Title: title, Top: strings.TrimSpace(text)}
}

// consume reads the 1 KiB topic from the start with one consumer process
// (one long-polling puller per queue) and reports message bytes per second.
func (r *runner) consume(ctx context.Context, rep *report) error {
	n, err := r.topicMessages(ctx, topic1K)
	if err != nil {
		return err
	}
	n = min(n, r.o.Consume)
	row := Row{Name: fmt.Sprintf("consume catch-up, 1 KiB, one consumer, all queues (%d msgs)", n), LogStore: r.variant,
		Metric: "MB/s", Target: fmt.Sprintf("≥ %.0f MB/s", targetConsumeMBps)}
	run := func(extra ...string) (Summary, error) {
		args := append([]string{"--json", "bench", "consume", "-t", topic1K, "-n", strconv.FormatInt(n, 10)}, extra...)
		return cliSummary(ctx, r.mq, args...)
	}
	for range r.o.Reps {
		s, err := run()
		if err != nil {
			return err
		}
		row.RaftmqRuns = append(row.RaftmqRuns, s)
		r.logf("%-62s raftmq %.1f MB/s (%.0f msgs/s)", row.Name, s.MBPerS, s.MsgsPerS)
	}
	row.Raftmq = median(row.RaftmqRuns, mbps)
	row.Result = passIf(row.Raftmq >= targetConsumeMBps)
	row.Note = errorNote(row.RaftmqRuns)
	rep.Rows = append(rep.Rows, row)
	if r.o.Profile {
		// Both sides: the consumer process costs about as much CPU as the
		// node, and the two share the machine's cores.
		file := filepath.Join(r.work, "leader-consume.pprof")
		cliFile := filepath.Join(r.work, "cli-consume.pprof")
		if err := r.leaderProfile(ctx, 2*time.Second, file, func() error {
			_, err := run("--cpuprofile", cliFile)
			return err
		}); err != nil {
			return fmt.Errorf("consume profile: %w", err)
		}
		rep.Profiles = append(rep.Profiles, profileTop(ctx, "raftmq node serving the consume catch-up", file),
			profileTop(ctx, "raftmq bench consume (the consumer process) during the catch-up", cliFile))
	}
	return nil
}

// topicMessages is the number of messages in a topic (sum over queues).
func (r *runner) topicMessages(ctx context.Context, topic string) (int64, error) {
	out, err := r.cli(ctx, "--json", "topic", "describe", topic)
	if err != nil {
		return 0, err
	}
	var d struct {
		QueueOffsets []struct {
			Min int64 `json:"minOffset"`
			Max int64 `json:"maxOffset"`
		} `json:"queueOffsets"`
	}
	if err := json.Unmarshal(out, &d); err != nil {
		return 0, fmt.Errorf("topic describe: %w: %s", err, out)
	}
	var n int64
	for _, q := range d.QueueOffsets {
		n += q.Max - q.Min
	}
	return n, nil
}

// restart fills the commitlog to o.Restart bytes, stops a follower with
// SIGTERM (checkpoint written), starts it again and times it to /healthz.
func (r *runner) restart(ctx context.Context, rep *report) error {
	li, err := r.mq.Leader(ctx)
	if err != nil {
		return err
	}
	if err := r.fillTo(ctx, r.mq, li, r.o.Restart, 16<<10); err != nil {
		return err
	}
	if li, err = r.mq.Leader(ctx); err != nil { // a fill round may have seen a leader change
		return err
	}
	f := r.mq.Nodes[(li+1)%len(r.mq.Nodes)]
	st, err := r.mq.Nodes[li].Status(ctx)
	if err != nil {
		return err
	}
	size := st.MaxOffset
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if code, err := f.Stop(sctx); err != nil || code != 0 {
		return fmt.Errorf("stop follower %s: exit %d: %v", f.Spec().ID, code, err)
	}
	t0 := time.Now()
	if err := f.Restart(); err != nil {
		return err
	}
	if err := f.WaitHealthy(sctx); err != nil {
		return err
	}
	serving := time.Since(t0).Seconds()
	r.logf("restart of follower %s with %d MiB: serving after %.2fs", f.Spec().ID, size>>20, serving)
	row := Row{Name: fmt.Sprintf("restart of a follower with %d MiB of commitlog: serving (SIGTERM, then start)", size>>20),
		LogStore: r.variant, Metric: "s", Raftmq: serving, Target: fmt.Sprintf("≤ %.0f s", targetRestartSecs),
		Result: passIf(serving <= targetRestartSecs)}
	if size < r.o.Restart {
		row.Result, row.Note = "miss", fmt.Sprintf("only %d MiB could be written", size>>20)
	}
	if r.o.Quick {
		row.Note = strings.TrimSpace(row.Note + " (quick run: small store, not the 1 GiB of the target)")
	}
	rep.Rows = append(rep.Rows, row)
	return r.restartAfterKill(ctx, rep, li)
}

// targetKillRestartSecs: kill -9 to serving, whatever was written.
const targetKillRestartSecs = 3.0

// restartAfterKill kills the other follower with SIGKILL while 16 KiB
// batches stream in, starts it again and times it to /healthz (abnormal
// recovery of its files, then Raft) and to caught up (its store applied
// what the leader had committed once the load ended).
func (r *runner) restartAfterKill(ctx context.Context, rep *report, li int) error {
	leader, f := r.mq.Nodes[li], r.mq.Nodes[(li+2)%len(r.mq.Nodes)]
	n, growth := "4000", int64(16<<20) // 64 MiB of 16 KiB messages; kill once 16 MiB landed
	if r.o.Quick {
		n, growth = "1000", 2<<20
	}
	loaded := make(chan error, 1)
	go func() {
		_, err := r.cli(ctx, "--json", "bench", "produce", "-t", topic16K, "-n", n, "-s", "16384", "-c", "8", "--batch", "16", "--inflight", "2")
		loaded <- err
	}()
	if err := r.waitGrowth(ctx, f, growth); err != nil {
		return err
	}
	if err := f.Kill(); err != nil {
		return err
	}
	t0 := time.Now()
	if err := f.Restart(); err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := f.WaitHealthy(sctx); err != nil {
		return err
	}
	serving := time.Since(t0).Seconds()
	if err := <-loaded; err != nil {
		// Sends lost to a leader change on a loaded machine: this row times
		// the restart, not the load.
		r.logf("the load under the kill: %v", err)
	}
	if li, err := r.mq.Leader(sctx); err == nil {
		leader = r.mq.Nodes[li]
	}
	st, err := leader.Status(sctx)
	if err != nil {
		return err
	}
	if err := waitApplied(sctx, f, st.AppliedIndex); err != nil {
		return err
	}
	caught := time.Since(t0).Seconds()
	size := st.MaxOffset
	r.logf("kill -9 of follower %s under load with %d MiB: serving after %.2fs, caught up after %.2fs", f.Spec().ID, size>>20, serving, caught)
	rep.Rows = append(rep.Rows,
		Row{Name: fmt.Sprintf("restart of a follower after kill -9 under load, %d MiB of commitlog: serving (abnormal recovery)", size>>20),
			LogStore: r.variant, Metric: "s", Raftmq: serving, Target: fmt.Sprintf("≤ %.0f s", targetKillRestartSecs),
			Result: passIf(serving <= targetKillRestartSecs)},
		Row{Name: fmt.Sprintf("restart of a follower after kill -9 under load, %d MiB of commitlog: caught up with the leader", size>>20),
			LogStore: r.variant, Metric: "s", Raftmq: caught, Target: "-", Result: "info"})
	return nil
}

// waitGrowth waits (bounded) until node p's commitlog grew by n bytes.
func (r *runner) waitGrowth(ctx context.Context, p *nodeproc.Proc, n int64) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	first := int64(-1)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if st, err := p.Status(ctx); err == nil {
			if first < 0 {
				first = st.MaxOffset
			}
			if st.MaxOffset-first >= n {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s: commitlog did not grow by %d bytes: %w", p.Spec().ID, n, ctx.Err())
		case <-tick.C:
		}
	}
}

// waitApplied waits until node p's store applied Raft index idx.
func waitApplied(ctx context.Context, p *nodeproc.Proc, idx uint64) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if st, err := p.Status(ctx); err == nil && st.AppliedIndex >= idx {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s did not apply index %d: %w", p.Spec().ID, idx, ctx.Err())
		case <-tick.C:
		}
	}
}

// boltRows repeats the storage-bound rows with raft-boltdb, the other log
// store (data dirs written before raft-wal became the default use it).
func (r *runner) boltRows(ctx context.Context, rep *report) error {
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	r.stopClusters(sctx)
	cancel()
	if err := r.startClusters(ctx, node.LogStoreBolt); err != nil {
		return err
	}
	var defs []abRow
	for _, d := range r.o.filter(abRows(r.o.Quick)) {
		if d.l == pipelinedLoad || d.l.Conc == 1 && d.l.Batch == 1 && d.l.Size == 1024 ||
			d.l.Conc == 16 && d.l.Batch > 1 || d.l.Conc == 128 && d.l.Batch == 1 && d.l.Size == 1024 {
			defs = append(defs, d)
		}
	}
	if len(defs) == 0 {
		return nil
	}
	r.warmUp(ctx)
	rows, err := r.runAB(ctx, defs)
	if err != nil {
		return err
	}
	for i := range rows {
		rows[i].Result = "info" // targets are for the default log store
	}
	rep.Rows = append(rep.Rows, rows...)
	return nil
}

// filter keeps the rows -rows selects.
func (o options) filter(rows []abRow) []abRow {
	if o.Rows == nil {
		return rows
	}
	var out []abRow
	for _, d := range rows {
		if o.Rows.MatchString(d.name) {
			out = append(out, d)
		}
	}
	return out
}

// step reports whether -steps selects the extra step name.
func (o options) step(name string) bool {
	switch o.Steps {
	case "", "all":
		return true
	case "none":
		return false
	}
	for _, s := range strings.Split(o.Steps, ",") {
		if strings.TrimSpace(s) == name {
			return true
		}
	}
	return false
}

// warmUp runs a short unmeasured load on both clusters: the first entries
// after a start touch fresh commitlog and consume-queue pages and open
// files (hundreds of ms per entry on a loaded machine), which would
// otherwise land in the first row.
func (r *runner) warmUp(ctx context.Context) {
	d := min(r.o.Duration, time.Second)
	for _, l := range []load{pipelinedLoad, {Size: 16 << 10, Conc: 16, Batch: 8, InFlight: 1}} {
		if _, err := r.produce(ctx, l, d); err != nil {
			r.logf("warm-up (raftmq): %v", err)
		}
		if _, err := r.ceiling(ctx, l, d); err != nil {
			r.logf("warm-up (ceiling): %v", err)
		}
	}
}
