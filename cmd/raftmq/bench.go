package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/spf13/cobra"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/openloop"
)

type benchFlags struct {
	mode     string
	topic    string
	n        int64
	size     int
	conc     int
	duration time.Duration
	rate     float64
	batch    int
	inflight int
	cpuprof  string // write this process's CPU profile here
}

func benchCmd(e *env) *cobra.Command {
	modes := map[string]string{
		"produce": "Measure produce throughput and latency (closed loop, or open loop with --rate)",
		"consume": "Measure consume throughput: one long-polling reader per queue",
		"e2e":     "Measure end-to-end latency: produce and consume at once, send time in the body",
	}
	var subs []*cobra.Command
	for _, mode := range []string{"produce", "consume", "e2e"} {
		f := benchFlags{mode: mode}
		cmd := &cobra.Command{
			Use:   mode + " -t T [-n N] [-s SIZE] [-c C] [--duration D] [--rate R] [--batch B] [--inflight K]",
			Short: modes[mode],
			Args:  noArgs,
			RunE: e.action(func(e *env, _ *cobra.Command, _ []string) error {
				if err := f.check(); err != nil {
					return err
				}
				c, err := e.connect()
				if err != nil {
					return err
				}
				defer c.Close()
				loadGeneratorGC()
				if f.cpuprof != "" {
					stop, err := startCPUProfile(f.cpuprof)
					if err != nil {
						return err
					}
					defer stop()
				}
				return bench(e, c, f)
			}),
		}
		fl := cmd.Flags()
		topicFlag(e, cmd, &f.topic, "topic (required)")
		fl.Int64VarP(&f.n, "num", "n", 10000, "messages (0: until --duration)")
		fl.IntVarP(&f.size, "size", "s", 1024, "body size")
		fl.IntVarP(&f.conc, "concurrency", "c", 4, "concurrent producers (consumers: one per queue)")
		fl.DurationVar(&f.duration, "duration", 0, "stop after this long (0: when -n is done)")
		fl.Float64Var(&f.rate, "rate", 0, "open loop: messages per second in total (0: closed loop)")
		fl.IntVar(&f.batch, "batch", 1, "messages per send")
		fl.IntVar(&f.inflight, "inflight", 1, "pipelined (async) sends outstanding per producer")
		fl.StringVar(&f.cpuprof, "cpuprofile", "", "write a CPU profile of this CLI process to FILE (is the load generator the bottleneck?)")
		subs = append(subs, cmd)
	}
	g := group("bench", "Load a running cluster and report throughput and latency percentiles", subs...)
	g.Long = `Load a running cluster and report count, seconds, msgs_per_s, mb_per_s,
p50_ms, p99_ms, p999_ms, max_ms and errors (--json: one summary object).
Latencies are recorded in an HdrHistogram; with --rate the load is open loop
and each latency is measured from the batch's due time.`
	return g
}

// benchGCPercent is the load generator's GOGC unless the environment sets
// one. The bench usually shares its machine's cores with the nodes it
// measures, and at the default (100) the Go runtime's collector took about
// a fifth of this process's CPU on 2,000 outstanding single-message sends;
// the live heap stays a few MiB, so collecting a quarter as often costs
// little memory.
const benchGCPercent = 400

// loadGeneratorGC sets benchGCPercent unless GOGC is set.
func loadGeneratorGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(benchGCPercent)
	}
}

// startCPUProfile profiles this process into file until stop is called.
func startCPUProfile(file string) (stop func(), err error) {
	out, err := os.Create(file)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		_ = out.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); _ = out.Close() }, nil
}

func (f *benchFlags) check() error {
	switch {
	case f.topic == "":
		return usagef("-t TOPIC is required")
	case f.n < 0 || f.size < 0 || f.duration < 0 || f.rate < 0:
		return usagef("-n, -s, --duration and --rate must not be negative")
	case f.n == 0 && f.duration == 0:
		return usagef("give -n or --duration")
	case f.conc < 1 || f.conc > 4096:
		return usagef("-c %d out of range [1, 4096]", f.conc)
	case f.batch < 1 || f.batch > 4096:
		return usagef("--batch %d out of range [1, 4096]", f.batch)
	case f.mode != "consume" && int64(f.batch)*int64(f.size) > maxBatchBytes:
		return usagef("--batch %d × -s %d is %d bytes per send, over %d: a send must stay well below the 64 MiB gRPC message limit (lower --batch)",
			f.batch, f.size, int64(f.batch)*int64(f.size), maxBatchBytes)
	case f.inflight < 1 || f.inflight > 1024:
		return usagef("--inflight %d out of range [1, 1024]", f.inflight)
	case f.mode == "e2e" && f.size < 8:
		return usagef("e2e needs -s >= 8 (the body carries the send time)")
	}
	return nil
}

// recorder collects latencies per worker and merges them.
type recorder struct {
	mu     sync.Mutex
	hist   *hdrhistogram.Histogram
	count  atomic.Int64
	bytes  atomic.Int64
	errors atomic.Int64
	first  atomic.Value // first error, for the report
}

func (r *recorder) fail(n int64, err error) {
	r.errors.Add(n)
	r.first.CompareAndSwap(nil, err)
}

func newHist() *hdrhistogram.Histogram {
	return hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3)
}

func (r *recorder) merge(h *hdrhistogram.Histogram) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hist.Merge(h)
}

func bench(e *env, c *client.Client, f benchFlags) error {
	ctx := e.ctx
	if f.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.duration)
		defer cancel()
	}
	rec := &recorder{hist: newHist()}
	prog := startProgress(e, func() string {
		line := fmt.Sprintf("%s: %d messages, %d errors", f.mode, rec.count.Load(), rec.errors.Load())
		if first := rec.first.Load(); first != nil {
			line += fmt.Sprintf("; first: %v", first)
		}
		return line
	})
	start := time.Now()
	var err error
	switch f.mode {
	case "produce":
		err = benchProduce(ctx, c, f, rec, nil)
	case "consume":
		err = benchConsume(ctx, c, f, rec, false, nil)
	case "e2e":
		err = benchE2E(ctx, c, f, rec)
	}
	secs := time.Since(start).Seconds()
	prog.Stop()
	if err != nil {
		return err
	}
	return reportBench(e, f, rec, secs)
}

// benchProduce sends f.n messages (or until ctx ends) from f.conc
// producers, each with up to f.inflight sends outstanding (pipelined). With
// --rate, batch k is due at start + k*batch/rate and its latency is measured
// from that time, so a slow send delays the sends after it and their wait is
// counted (no coordinated omission).
func benchProduce(ctx context.Context, c *client.Client, f benchFlags, rec *recorder, sent *atomic.Int64) error {
	var slots atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < f.conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			benchProducer(ctx, c, f, rec, sent, start, &slots)
		}()
	}
	wg.Wait()
	return nil
}

// benchProducer is one producer: it claims the next batch slot, waits for
// its due time and a free in-flight window, and sends it asynchronously.
func benchProducer(ctx context.Context, c *client.Client, f benchFlags, rec *recorder, sent *atomic.Int64, start time.Time, slots *atomic.Int64) {
	h := &lockedHist{h: newHist()}
	defer rec.merge(h.h)
	bodies := newBodyPool(f.size)
	window := make(chan struct{}, f.inflight)
	var sends sync.WaitGroup
	defer sends.Wait()
	for !ended(ctx) {
		k := slots.Add(1) - 1
		first := k * int64(f.batch)
		if f.n > 0 && first >= f.n {
			return
		}
		n := int64(f.batch)
		if f.n > 0 {
			n = min(n, f.n-first)
		}
		due := time.Now()
		if f.rate > 0 {
			due = openloop.Due(start, first, f.rate)
			if !openloop.SleepUntil(ctx, due) {
				return
			}
		}
		select {
		case window <- struct{}{}:
		case <-ctx.Done():
			return
		}
		send := func() {
			benchSendBatch(ctx, c, f, int(n), due, bodies, h, rec)
			if sent != nil {
				sent.Add(n)
			}
			<-window
		}
		if f.inflight == 1 { // synchronous: no goroutine hand-off per send
			send()
			continue
		}
		sends.Add(1)
		go func() {
			defer sends.Done()
			send()
		}()
	}
}

// bodyPool holds one producer's message bodies of one size between sends:
// the body only has its first 8 bytes written per send (the rest stays
// zero), so a body comes back as it went out but for them.
type bodyPool struct{ p sync.Pool }

func newBodyPool(size int) *bodyPool {
	return &bodyPool{p: sync.Pool{New: func() any { b := make([]byte, size); return &b }}}
}

func (b *bodyPool) get() []byte { return *b.p.Get().(*[]byte) }

// put returns body once no request refers to it any more.
func (b *bodyPool) put(body []byte) { b.p.Put(&body) }

// lockedHist is a histogram shared by one producer's in-flight sends.
type lockedHist struct {
	mu sync.Mutex
	h  *hdrhistogram.Histogram
}

func (l *lockedHist) record(us int64, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_ = l.h.RecordValues(us, int64(n))
}

func benchSendBatch(ctx context.Context, c *client.Client, f benchFlags, n int, due time.Time, bodies *bodyPool, h *lockedHist, rec *recorder) {
	msgs := make([]client.Message, n)
	// The messages of one batch share their body (the send time, then
	// zeros): the load generator shares the CPU with the nodes, so it
	// clears one body per batch, not one per message, and reuses the
	// bodies of the sends that returned.
	body := bodies.get()
	if f.size >= 8 {
		binary.BigEndian.PutUint64(body, uint64(time.Now().UnixNano()))
	}
	for i := range msgs {
		msgs[i] = client.NewMessage(f.topic, body)
	}
	res, err := c.Send(ctx, msgs...)
	lat := time.Since(due)
	if err == nil { // else a merged request may still hold it
		bodies.put(body)
	}
	if err != nil {
		if !ended(ctx) {
			rec.fail(int64(n), err)
		}
		return
	}
	ok := 0
	for _, r := range res {
		if r.Err != nil {
			rec.fail(1, r.Err)
			continue
		}
		ok++
	}
	if f.mode == "produce" && ok > 0 {
		h.record(lat.Microseconds(), ok)
		rec.count.Add(int64(ok))
		rec.bytes.Add(int64(ok) * int64(f.size))
	}
}

// ended reports whether the run is over: ctx is done or its deadline has
// passed (gRPC fails a call at the deadline by its own timer, which can
// fire before the context's; such calls are cut off by the end of the run,
// not failures).
func ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// benchConsume pulls every queue of the topic, one long-polling puller per
// queue (so e2e latency is not inflated by polling other queues), until f.n
// messages or ctx ends. e2e records now - send time (from the body) per
// message; otherwise the pull latency. start, if given, are the offsets to
// start at.
func benchConsume(ctx context.Context, c *client.Client, f benchFlags, rec *recorder, e2e bool, start map[int32]int64) error {
	t, err := c.DescribeTopic(ctx, f.topic)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for _, qo := range t.Offsets {
		off := qo.Min
		if s, ok := start[qo.QueueID]; ok {
			off = s
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := newHist()
			defer rec.merge(h)
			for ctx.Err() == nil {
				if f.n > 0 && rec.count.Load() >= f.n {
					cancel()
					return
				}
				off = benchPull(ctx, c, f, qo.QueueID, off, 100*time.Millisecond, e2e, h, rec)
			}
		}()
	}
	wg.Wait()
	return nil
}

// benchPullMessages is the pull size of bench consume: the store's maximum
// per pull, so a catch-up is not bounded by round trips.
const benchPullMessages = 1024

func benchPull(ctx context.Context, c *client.Client, f benchFlags, q int32, off int64, wait time.Duration, e2e bool, h *hdrhistogram.Histogram, rec *recorder) int64 {
	t0 := time.Now()
	b, err := c.PullBatch(ctx, client.PullRequest{Topic: f.topic, QueueID: q, Offset: off, MaxMessages: benchPullMessages, MaxWait: wait})
	if err != nil {
		if ctx.Err() == nil {
			rec.fail(1, err)
		}
		return off
	}
	now := time.Now()
	pullLat := now.Sub(t0).Microseconds()
	var n, size int64
	for {
		m, ok, err := b.Next()
		if err != nil {
			rec.fail(1, err)
			break
		}
		if !ok {
			break
		}
		if e2e && len(m.Body) >= 8 {
			_ = h.RecordValue(now.Sub(time.Unix(0, int64(binary.BigEndian.Uint64(m.Body)))).Microseconds())
		}
		n++
		size += int64(len(m.Body))
	}
	if !e2e && n > 0 {
		_ = h.RecordValues(pullLat, n)
	}
	rec.count.Add(n)
	rec.bytes.Add(size)
	if b.NextOffset > off {
		return b.NextOffset
	}
	return off
}

func benchE2E(ctx context.Context, c *client.Client, f benchFlags, rec *recorder) error {
	t, err := c.DescribeTopic(ctx, f.topic)
	if err != nil {
		return err
	}
	start := map[int32]int64{}
	for _, q := range t.Offsets {
		start[q.QueueID] = q.Max
	}
	perr := make(chan error, 1)
	go func() { perr <- benchProduce(ctx, c, f, &recorder{hist: newHist()}, nil) }()
	cerr := benchConsume(ctx, c, f, rec, true, start)
	return errors.Join(cerr, <-perr)
}

func reportBench(e *env, f benchFlags, rec *recorder, secs float64) error {
	h := rec.hist
	ms := func(q float64) float64 { return float64(h.ValueAtQuantile(q)) / 1000 }
	n := rec.count.Load()
	sum := map[string]any{"mode": f.mode, "count": n, "seconds": secs,
		"msgs_per_s": float64(n) / max(secs, 1e-9), "mb_per_s": float64(rec.bytes.Load()) / (1 << 20) / max(secs, 1e-9),
		"p50_ms": ms(50), "p99_ms": ms(99), "p999_ms": ms(99.9), "max_ms": float64(h.Max()) / 1000,
		"errors": rec.errors.Load(), "size": f.size, "batch": f.batch, "inflight": f.inflight,
		"concurrency": f.conc, "rate": f.rate}
	if e.json {
		if err := e.emit(sum); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(e.stdout, "%s: %d msgs in %.2fs = %.0f msg/s, %.2f MB/s; latency p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, max %.2f ms; %d errors\n",
			f.mode, n, secs, sum["msgs_per_s"], sum["mb_per_s"], ms(50), ms(99), ms(99.9), sum["max_ms"], rec.errors.Load())
	}
	if rec.errors.Load() > 0 {
		return fmt.Errorf("%d errors; first: %v", rec.errors.Load(), rec.first.Load())
	}
	return nil
}
