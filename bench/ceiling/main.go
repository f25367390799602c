// Command ceiling is one member of a bare hashicorp/raft cluster with a
// no-op FSM: the ceiling that bench/ compares raftmq against. It takes the
// same flags, environment and config file as raftmq-node (node.Load) and
// builds its Raft config (node.BuildRaftConfig) and log store
// (node.OpenRaftStore) with the node's own functions, so settings and
// storage cannot drift from the product's. Nothing of raftmq sits on top:
// the load runs inside the leader process, calling raft.Apply directly.
//
// HTTP on --http-addr: GET /healthz (200 once a leader is known), GET
// /status (id, state, leaderId), POST /run?size=&c=&duration= (appliers on
// this node, which must be the leader; answers the bench summary JSON).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/internal/openloop"
	"github.com/raftmq/raftmq/node"
)

func main() { os.Exit(run()) }

func run() int {
	cfg, err := node.Load(os.Args[1:], os.Getenv, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ceiling:", err)
		return 2
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "ceiling", Level: hclog.LevelFromString(cfg.LogLevel)}).With("node", cfg.ID)
	c, err := start(cfg, log)
	if err != nil {
		log.Error("start failed", "error", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	<-ctx.Done()
	if err := c.close(); err != nil {
		log.Error("shutdown", "error", err)
		return 1
	}
	return 0
}

// noopFSM applies nothing: the cost of the state machine is zero.
type noopFSM struct{}

func (noopFSM) Apply(*raft.Log) interface{} { return nil }
func (noopFSM) ApplyBatch(logs []*raft.Log) []interface{} {
	return make([]interface{}, len(logs))
}
func (noopFSM) Snapshot() (raft.FSMSnapshot, error) { return noopSnapshot{}, nil }
func (noopFSM) Restore(rc io.ReadCloser) error      { return rc.Close() }

type noopSnapshot struct{}

func (noopSnapshot) Persist(sink raft.SnapshotSink) error { return sink.Close() }
func (noopSnapshot) Release()                             {}

type ceiling struct {
	cfg   node.Config
	raft  *raft.Raft
	store node.RaftStore
	trans *node.RaftTransport
	http  *http.Server
	lis   net.Listener
	done  chan struct{}
}

func start(cfg node.Config, log hclog.Logger) (*ceiling, error) {
	dir := filepath.Join(cfg.Dir, "raft")
	st, err := node.OpenRaftStore(cfg.Raft.LogStore, dir, log.Named("raft-log"))
	if err != nil {
		return nil, err
	}
	c := &ceiling{cfg: cfg, store: st, done: make(chan struct{})}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(dir, "snapshots"), cfg.Raft.SnapshotRetain, log.Named("snapshots"))
	if err != nil {
		return nil, errors.Join(err, st.Close())
	}
	c.trans, err = node.NewRaftTransport(cfg, log.Named("raft-net"))
	if err != nil {
		return nil, errors.Join(err, st.Close())
	}
	hasState, err := raft.HasExistingState(st, st, snaps)
	if err != nil {
		return nil, errors.Join(err, c.trans.Close(), st.Close())
	}
	c.raft, err = raft.NewRaft(node.BuildRaftConfig(cfg, log.Named("raft")), noopFSM{}, node.CachedLogs(st), st, snaps, c.trans)
	if err != nil {
		return nil, errors.Join(err, c.trans.Close(), st.Close())
	}
	if !hasState && cfg.Bootstrap {
		var servers []raft.Server
		for _, p := range cfg.Peers {
			servers = append(servers, raft.Server{ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr)})
		}
		// ErrCantBootstrap: a peer that bootstrapped first already
		// replicated the configuration here (a slow start on a loaded
		// machine), as the node tolerates too.
		if err := c.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			_ = c.close()
			return nil, err
		}
	}
	if c.lis, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
		_ = c.close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", c.handleHealthz)
	mux.HandleFunc("GET /status", c.handleStatus)
	mux.HandleFunc("POST /run", c.handleRun)
	c.http = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(c.done)
		_ = c.http.Serve(c.lis)
	}()
	return c, nil
}

func (c *ceiling) close() error {
	var errs []error
	if c.http != nil {
		errs = append(errs, c.http.Close())
		<-c.done
	}
	errs = append(errs, c.raft.Shutdown().Error(), c.trans.Close(), c.store.Close())
	return errors.Join(errs...)
}

func (c *ceiling) handleHealthz(w http.ResponseWriter, _ *http.Request) {
	if _, id := c.raft.LeaderWithID(); id == "" {
		http.Error(w, "no leader", http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}

func (c *ceiling) handleStatus(w http.ResponseWriter, _ *http.Request) {
	addr, id := c.raft.LeaderWithID()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"id": c.cfg.ID, "state": c.raft.State().String(),
		"leaderId": string(id), "leaderRaftAddr": string(addr), "commitIndex": c.raft.CommitIndex(),
		"appliedIndex": c.raft.AppliedIndex(), "members": []any{}})
}

// handleRun runs c appliers, each looping on Apply(size bytes).Error() for
// duration, and answers count, rates and Apply latency quantiles. With
// rate (entries per second in total) the load is open loop: entry k is due
// at start + k/rate, an applier waits for the next due entry, and its
// latency counts from the due time (as `raftmq bench produce --rate`).
func (c *ceiling) handleRun(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	size, err1 := strconv.Atoi(q.Get("size"))
	conc, err2 := strconv.Atoi(q.Get("c"))
	dur, err3 := time.ParseDuration(q.Get("duration"))
	rate, err4 := 0.0, error(nil)
	if v := q.Get("rate"); v != "" {
		rate, err4 = strconv.ParseFloat(v, 64)
	}
	if err := errors.Join(err1, err2, err3, err4); err != nil || size < 0 || conc < 1 || dur <= 0 || rate < 0 {
		http.Error(w, fmt.Sprintf("bad size/c/duration/rate: %v", err), http.StatusBadRequest)
		return
	}
	if c.raft.State() != raft.Leader {
		http.Error(w, "not the leader", http.StatusConflict)
		return
	}
	sum := c.load(r.Context(), size, conc, rate, dur)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(sum)
}

func (c *ceiling) load(ctx context.Context, size, conc int, rate float64, dur time.Duration) map[string]any {
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte(i)
	}
	ctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	var mu sync.Mutex
	total := hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3)
	var count, errs int64
	var firstErr error
	var slots atomic.Int64 // open loop: the next entry to apply
	start := time.Now()
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			h := hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3)
			var n, e int64
			var fe error
			for ctx.Err() == nil {
				t0 := time.Now()
				if rate > 0 {
					t0 = openloop.Due(start, slots.Add(1)-1, rate)
					if !openloop.SleepUntil(ctx, t0) {
						break
					}
				}
				if err := c.raft.Apply(payload, c.cfg.ApplyTimeout).Error(); err != nil {
					e++
					fe = cmp(fe, err)
					break // not the leader any more, or shut down: this applier stops
				}
				_ = h.RecordValue(time.Since(t0).Microseconds())
				n++
			}
			mu.Lock()
			defer mu.Unlock()
			total.Merge(h)
			count, errs, firstErr = count+n, errs+e, cmp(firstErr, fe)
		})
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	ms := func(p float64) float64 { return float64(total.ValueAtQuantile(p)) / 1000 }
	out := map[string]any{"mode": "ceiling", "count": count, "seconds": secs,
		"msgs_per_s": float64(count) / secs, "mb_per_s": float64(count) * float64(size) / (1 << 20) / secs,
		"p50_ms": ms(50), "p99_ms": ms(99), "p999_ms": ms(99.9), "max_ms": float64(total.Max()) / 1000,
		"errors": errs, "size": size, "concurrency": conc, "rate": rate}
	if firstErr != nil {
		out["first_error"] = firstErr.Error()
	}
	return out
}

func cmp(first, err error) error {
	if first != nil {
		return first
	}
	return err
}
