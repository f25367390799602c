package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/raftmq/raftmq/internal/nodeproc"
)

// Targets of the kill -9 restart matrix.
const (
	// targetRestartFlatness: slowest over fastest time to serving across
	// the sizes written, per victim and message size.
	targetRestartFlatness = 1.5
	// restartTopic is the topic the matrix fills (8 queues).
	restartTopic = "benchrestart"
	// fillRoundTimeout and fillRoundMinRate bound one fill round of n
	// bytes to fillRoundTimeout + n/fillRoundMinRate (a tenth of this
	// machine's rate): a round still running then stalled.
	fillRoundTimeout = 90 * time.Second
	fillRoundMinRate = 8 << 20 // bytes per second
)

// restartSizes is how much the matrix writes before each kill: 1, 4 and 16
// GiB, or 8 and 32 MiB in a quick run.
func (o options) restartSizes() []int64 {
	if o.KillSizes != nil {
		return o.KillSizes
	}
	if o.Quick {
		return []int64{8 << 20, 32 << 20}
	}
	return []int64{1 << 30, 4 << 30, 16 << 30}
}

// restartCase is one column of the matrix: who is killed, which messages
// filled the commitlog.
type restartCase struct {
	nodes   int // 1: a single node is killed; 3: a follower of a cluster
	msgSize int
}

func (c restartCase) String() string {
	who := "a follower"
	if c.nodes == 1 {
		who = "a single node"
	}
	return fmt.Sprintf("%s, %s messages", who, sizeName(c.msgSize))
}

// restartMatrix kills a single node and a follower of a fresh 3-node
// cluster with SIGKILL after 1, 4 and 16 GiB were written in 1 KiB and in
// 1 MiB messages, and times each to serving (/healthz: abnormal recovery of
// its files, then Raft's start-up) and, for the follower, to caught up;
// seven kills at each size once the fill is written back, medians kept
// (killAfterWriting). The commitlog grows between kills, so each column
// writes its largest size once. Each column's data is removed before the
// next.
func (r *runner) restartMatrix(ctx context.Context, rep *report) error {
	for _, c := range []restartCase{{1, 1 << 10}, {3, 1 << 10}, {1, 1 << 20}, {3, 1 << 20}} {
		if r.o.KillCases != nil && !r.o.KillCases.MatchString(c.String()) {
			continue
		}
		rows, err := r.restartColumn(ctx, c)
		if err != nil {
			return fmt.Errorf("restart matrix, %v: %w", c, err)
		}
		rep.Rows = append(rep.Rows, rows...)
	}
	return nil
}

// restartColumn runs one case of the matrix on its own cluster.
func (r *runner) restartColumn(ctx context.Context, c restartCase) ([]Row, error) {
	dir := filepath.Join(r.work, fmt.Sprintf("restart-%d-%d", c.nodes, c.msgSize))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if !r.o.Keep {
		defer os.RemoveAll(dir)
	}
	// Info: the logs (-keep, -keep-logs) then show each restart's phases (recovery,
	// Raft's start-up, the first barrier).
	args := []string{"--log-level", "info"}
	if toml := r.o.storeTOML(); toml != "" {
		conf := filepath.Join(dir, "store.toml")
		if err := os.WriteFile(conf, []byte(toml), 0o644); err != nil {
			return nil, err
		}
		args = append(args, "--config", conf)
	}
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	cl, err := nodeproc.StartCluster(sctx, r.bin, nodeproc.ClusterOptions{N: c.nodes, Dir: dir, Args: args})
	cancel()
	if err != nil {
		return nil, err
	}
	defer func() {
		// Not ctx: a run cut off by its deadline still stops its nodes
		// gracefully, and says so if they do not.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
		defer cancel()
		if err := cl.Stop(sctx); err != nil {
			r.logf("stopping the restart cluster: %v", err)
		}
		if err := r.keepLogs(cl, filepath.Base(dir)); err != nil {
			r.logf("keeping the restart cluster's logs: %v", err)
		}
	}()
	if _, err := cl.CLI(ctx, "topic", "create", restartTopic, "--queues", "8"); err != nil {
		return nil, fmt.Errorf("topic create: %w", err)
	}
	var rows []Row
	var servings []float64
	for _, size := range r.o.restartSizes() {
		k, err := r.killAfterWriting(ctx, cl, c, size)
		if err != nil {
			return nil, err
		}
		serving, slowest, caught, written := medianOf(k.serving), slices.Max(k.serving), medianOf(k.caught), k.written
		servings = append(servings, serving)
		name := fmt.Sprintf("kill -9 of %v, after %d MiB written", c, written>>20)
		r.logf("%s: serving after %.2fs (each kill: %s), caught up after %.2fs (medians of %d kills)",
			name, serving, secondsList(k.serving), caught, r.o.restartKills())
		kills := fmt.Sprintf("median of %d kills", r.o.restartKills())
		target := fmt.Sprintf("≤ %.0f s", targetKillRestartSecs)
		rows = append(rows, Row{Name: name + ": serving", LogStore: r.variant, Metric: "s", Raftmq: serving,
			Target: target, Result: passIf(serving <= targetKillRestartSecs), Note: kills},
			Row{Name: name + ": serving, slowest kill", LogStore: r.variant, Metric: "s", Raftmq: slowest,
				Target: target, Result: passIf(slowest <= targetKillRestartSecs),
				Note: fmt.Sprintf("slowest of %d kills (the first after the fill: %.2f s)", r.o.restartKills(), k.serving[0])})
		if c.nodes > 1 {
			rows = append(rows, Row{Name: name + ": caught up with the leader", LogStore: r.variant, Metric: "s",
				Raftmq: caught, Target: "-", Result: "info", Note: kills})
		}
	}
	flat := slices.Max(servings) / slices.Min(servings)
	rows = append(rows, Row{Name: fmt.Sprintf("kill -9 of %v: slowest / fastest time to serving over %s", c, sizeList(r.o.restartSizes())),
		LogStore: r.variant, Metric: "×", Raftmq: flat, Target: fmt.Sprintf("≤ %.1f", targetRestartFlatness),
		Result: passIf(flat <= targetRestartFlatness)})
	return rows, nil
}

// keepLogs copies cl's node logs into <-keep-logs>/<column>/ when the flag
// is set: a full run cannot keep the columns' data (tens of GiB each), and
// the logs are what attributes a slow restart.
func (r *runner) keepLogs(cl *nodeproc.Cluster, column string) error {
	if r.o.KeepLogs == "" {
		return nil
	}
	dst := filepath.Join(r.o.KeepLogs, column)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, p := range cl.Nodes {
		b, err := os.ReadFile(p.LogPath())
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, filepath.Base(p.LogPath())), b, 0o644); err != nil {
			return err
		}
	}
	r.logf("restart cluster logs kept in %s", dst)
	return nil
}

// secondsList formats seconds as "0.05 0.04 ..." (ms precision).
func secondsList(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatFloat(x, 'f', 3, 64)
	}
	return strings.Join(s, " ")
}

func sizeList(sizes []int64) string {
	names := make([]string, len(sizes))
	for i, n := range sizes {
		names[i] = sizeName(n)
	}
	return strings.Join(names, ", ")
}

// killAfterWriting fills cl's commitlog to size bytes with c's messages,
// waits for the kernel to write the fill back (sync) and for the nodes to
// finish the background work it left (waitQuiet), then restartKills
// times SIGKILLs the victim (node 0 alone, or a follower), starts it again
// and times it to serving and to applying what the leader had; it returns
// every kill's times, in order (the matrix reports medians, since restarts
// of tens of milliseconds vary by as much from one kill to the next, and
// the slowest: the first kill reads files the fill left cold in a page
// cache smaller than the three nodes' data). Without the sync the first kills after a fill of
// gigabytes time the disk writing the fill back (each restart's fsyncs
// queue behind it), which depends on the fill, not on what is stored.
func (r *runner) killAfterWriting(ctx context.Context, cl *nodeproc.Cluster, c restartCase, size int64) (kills, error) {
	li, err := cl.Leader(ctx)
	if err != nil {
		return kills{}, err
	}
	if err := r.fillTo(ctx, cl, li, size, c.msgSize); err != nil {
		return kills{}, err
	}
	synced := time.Now()
	syscall.Sync()
	r.logf("the fill's writeback took %.2fs (sync) before the kills", time.Since(synced).Seconds())
	if err := r.waitQuiet(ctx, cl); err != nil {
		return kills{}, err
	}
	var k kills
	for range r.o.restartKills() {
		s, cu, w, err := r.killOnce(ctx, cl)
		if err != nil {
			return kills{}, err
		}
		k.serving, k.caught, k.written = append(k.serving, s), append(k.caught, cu), w
	}
	return k, nil
}

// kills is what killAfterWriting measured: seconds to serving and to caught
// up of each kill, in order, and the commitlog size at the last.
type kills struct {
	serving, caught []float64
	written         int64
}

// Quiet cluster: the kills wait until the nodes together used at most
// quietCPU of CPU time in a quietWindow (at most quietWait). A fill leaves
// background work behind it: each node's allocator pre-touching the
// segment after the one the fill rolled to (a 1 GiB file faulted in page by
// page), snapshots by log size. On this machine three nodes share two
// cores, so the first kills after a fill restarted a follower while the
// other two nodes' pre-touch took the CPU: 100-300 ms slower, at any size.
// On a node's own machine that contention does not exist.
const (
	quietWindow = 500 * time.Millisecond
	quietCPU    = 50 * time.Millisecond
	quietWait   = time.Minute
)

// waitQuiet waits until cl's nodes are quiet (see quietWindow) and logs how
// long that took.
func (r *runner) waitQuiet(ctx context.Context, cl *nodeproc.Cluster) error {
	started := time.Now()
	prev, err := clusterCPU(cl)
	if err != nil {
		return err
	}
	for time.Since(started) < quietWait {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(quietWindow):
		}
		now, err := clusterCPU(cl)
		if err != nil {
			return err
		}
		if now-prev <= quietCPU {
			r.logf("the nodes were quiet (%v of CPU in %v) %.2fs after the writeback", now-prev, quietWindow, time.Since(started).Seconds())
			return nil
		}
		prev = now
	}
	r.logf("the nodes were not quiet after %v (more than %v of CPU in every %v): killing anyway", quietWait, quietCPU, quietWindow)
	return nil
}

// clusterCPU is the CPU time (user and system) cl's node processes used so far.
func clusterCPU(cl *nodeproc.Cluster) (time.Duration, error) {
	var total time.Duration
	for _, p := range cl.Nodes {
		d, err := processCPU(p.PID())
		if err != nil {
			return 0, err
		}
		total += d
	}
	return total, nil
}

// processCPU reads utime+stime of pid from /proc/PID/stat (clock ticks of
// 10 ms: USER_HZ is 100 on Linux).
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')') // the command name may hold spaces
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	var ticks int64
	for _, field := range f[11:13] { // fields 14 and 15: utime, stime
		n, err := strconv.ParseInt(field, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}

// restartPoll is how often killOnce asks a restarted node whether it
// serves: restarts take tens of milliseconds, which the default 50 ms poll
// would round to its multiples.
const restartPoll = 2 * time.Millisecond

// restartKills is how many times the matrix kills its victim at each size.
func (o options) restartKills() int {
	if o.Quick {
		return 1
	}
	return 7
}

// killOnce SIGKILLs a follower of cl (or its only node), starts it again
// and times it to serving and to applying what the leader had applied.
func (r *runner) killOnce(ctx context.Context, cl *nodeproc.Cluster) (serving, caught float64, written int64, err error) {
	li, err := cl.Leader(ctx) // a fill round or an earlier kill may have moved the leader
	if err != nil {
		return 0, 0, 0, err
	}
	st, err := cl.Nodes[li].Status(ctx)
	if err != nil {
		return 0, 0, 0, err
	}
	victim := cl.Nodes[(li+1)%len(cl.Nodes)]
	if err := victim.Kill(); err != nil {
		return 0, 0, 0, err
	}
	t0 := time.Now()
	if err := victim.Restart(); err != nil {
		return 0, 0, 0, err
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := victim.WaitHealthyEvery(sctx, restartPoll); err != nil {
		return 0, 0, 0, err
	}
	serving = time.Since(t0).Seconds()
	if err := waitApplied(sctx, victim, st.AppliedIndex); err != nil {
		return 0, 0, 0, err
	}
	return serving, time.Since(t0).Seconds(), st.MaxOffset, nil
}

// fillTo produces msgSize-byte messages in sends of about 1 MiB until the
// leader's commitlog holds size bytes, in bounded rounds.
func (r *runner) fillTo(ctx context.Context, cl *nodeproc.Cluster, li int, size int64, msgSize int) error {
	batch := max(1, (1<<20)/msgSize)
	var lastErr error
	for round := 0; round < 20; round++ {
		st, err := cl.Nodes[li].Status(ctx)
		if err != nil {
			return err
		}
		missing := size - st.MaxOffset
		if missing <= 0 {
			return nil
		}
		n := missing/int64(msgSize) + 1
		r.logf("filling %d MiB more with %s messages", missing>>20, sizeName(msgSize))
		args := []string{"--json", "bench", "produce", "-t", restartTopic, "-n", strconv.FormatInt(n, 10),
			"-s", strconv.Itoa(msgSize), "-c", "8", "--batch", strconv.Itoa(batch), "--inflight", "2"}
		// A failed send (a leader change on a loaded machine) only costs a
		// round: the loop reads the commitlog size again. A round that
		// stalls is cut off and leaves the nodes' blocked goroutines in the
		// log.
		limit := fillRoundTimeout + time.Duration(missing/fillRoundMinRate)*time.Second
		rctx, cancel := context.WithTimeout(ctx, limit)
		var sockets string
		out, err := cl.CLIWatched(rctx, func(pid int) { sockets = tcpSockets(pid) }, args...)
		stalled := rctx.Err() != nil
		cancel()
		if err != nil {
			dump := ""
			if i := bytes.Index(out, []byte("SIGQUIT")); stalled && i >= 0 {
				out, dump = out[:i], string(out[i:]) // the CLI's goroutines (nodeproc.Cluster.CLI)
			}
			lastErr = fmt.Errorf("raftmq %v: %w: %s", args, err, out)
			r.logf("fill round %d: %v", round, lastErr)
			if stalled {
				r.logf("fill round %d stalled for %v; the nodes' addresses %v; the CLI's TCP sockets:\n%sthe CLI's blocked goroutines:\n%s%s",
					round, limit, nodeAddrs(cl), sockets, blockedStacks(dump, 25), stuckReport(context.WithoutCancel(ctx), cl))
			}
			if li, err = cl.Leader(ctx); err != nil {
				return err
			}
		}
	}
	return fmt.Errorf("commitlog did not reach %d bytes (last error: %v)", size, lastErr)
}
