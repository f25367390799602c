package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/raftmq/raftmq/internal/nodeproc"
)

// targetBaselineRatio: the write-path issue asks the async single-message
// row and the client-batched row for 3 × what main did when it was filed.
const targetBaselineRatio = 3.0

// baselineLoads are those two rows, as the issue measured them with the CLI.
var baselineLoads = []struct {
	name string
	l    load
}{
	{"produce 1 KiB, 4 producers, single messages, 500 in flight each", load{Size: 1024, Conc: 4, Batch: 1, InFlight: 500}},
	{"produce 1 KiB, 4 producers, client batches of 128, 4 in flight each", load{Size: 1024, Conc: 4, Batch: 128, InFlight: 4}},
}

// baseline builds raftmq-node at o.Baseline from a git worktree, starts a
// three-node cluster of it with that revision's own defaults beside the
// current one, and measures baselineLoads on both, alternating which goes
// first, with the current CLI as the load on both. The row's ceiling column
// holds the baseline.
func (r *runner) baseline(ctx context.Context, rep *report) error {
	if r.o.Baseline == "" {
		return nil
	}
	bin, err := r.buildRevision(ctx, r.o.Baseline)
	if err != nil {
		return err
	}
	dir := filepath.Join(r.work, "baseline")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	r.logf("starting 3-node raftmq cluster at %s", r.o.Baseline)
	base, err := nodeproc.StartCluster(sctx, nodeproc.Binaries{Node: bin, CLI: r.bin.CLI},
		nodeproc.ClusterOptions{N: 3, Dir: dir, Args: []string{"--log-level", "warn"}, NoAnnounce: true, NoRemotingFlags: !hasFlag(bin, "--remoting-addr")})
	if err != nil {
		return fmt.Errorf("baseline cluster at %s: %w", r.o.Baseline, err)
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		_ = base.Stop(stopCtx)
	}()
	if out, err := base.CLI(ctx, "topic", "create", topic1K, "--queues", "8"); err != nil {
		return fmt.Errorf("baseline topic create: %w: %s", err, out)
	}
	// Warm both by count, not time: an older node may stall on its first
	// segment (84a99e6 waited seconds for a 1 GiB pre-touch).
	for _, c := range []*nodeproc.Cluster{r.mq, base} {
		if out, err := c.CLI(ctx, "--json", "bench", "produce", "-t", topic1K, "-n", "20000", "-s", "1024", "-c", "4",
			"--batch", "128", "--inflight", "4"); err != nil {
			return fmt.Errorf("warm-up: %w: %s", err, out)
		}
	}
	for _, b := range baselineLoads {
		row := Row{Name: fmt.Sprintf("%s: vs %s", b.name, r.o.Baseline), LogStore: r.variant, Load: &b.l, Metric: "msgs/s",
			Target: fmt.Sprintf("≥ %.0f × %s", targetBaselineRatio, r.o.Baseline),
			Note:   fmt.Sprintf("ceiling column: raftmq built at %s with its own defaults", r.o.Baseline)}
		for rep := 0; rep < r.o.Reps; rep++ {
			for k := 0; k < 2; k++ {
				current := (k == 0) == (rep%2 == 0)
				c := base
				if current {
					c = r.mq
				}
				s, err := r.produceOn(ctx, c, b.l, r.o.Duration)
				if err != nil {
					return fmt.Errorf("%s: %w", row.Name, err)
				}
				if current {
					row.RaftmqRuns = append(row.RaftmqRuns, s)
				} else {
					row.CeilingRuns = append(row.CeilingRuns, s)
				}
			}
		}
		row.Raftmq, row.Ceiling = median(row.RaftmqRuns, msgs), median(row.CeilingRuns, msgs)
		if row.Ceiling > 0 {
			row.Ratio = row.Raftmq / row.Ceiling
		}
		row.Result = passIf(row.Ratio >= targetBaselineRatio)
		r.logf("%-62s now %9.1f  %s %9.1f msgs/s (%.2f×)", b.name, row.Raftmq, r.o.Baseline, row.Ceiling, row.Ratio)
		rep.Rows = append(rep.Rows, row)
	}
	return nil
}

// buildRevision builds cmd/node at rev from a temporary git worktree of
// this repository and returns the binary's path.
func (r *runner) buildRevision(ctx context.Context, rev string) (string, error) {
	root, err := nodeproc.ModuleRoot()
	if err != nil {
		return "", err
	}
	src := filepath.Join(r.work, "baseline-src")
	bin := filepath.Join(r.work, "baseline-bin", "raftmq-node")
	r.logf("building raftmq-node at %s", rev)
	if out, err := exec.CommandContext(ctx, "git", "-C", root, "worktree", "add", "--detach", src, rev).CombinedOutput(); err != nil {
		return "", fmt.Errorf("git worktree add %s: %w: %s", rev, err, out)
	}
	defer func() {
		_ = exec.Command("git", "-C", root, "worktree", "remove", "--force", src).Run()
	}()
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/node")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %w: %s", rev, err, out)
	}
	return bin, nil
}

// hasFlag reports whether the node binary bin lists flag in its -h output
// (a baseline may predate it).
func hasFlag(bin, flag string) bool {
	out, _ := exec.Command(bin, "-h").CombinedOutput() // -h exits 0 or 2 depending on the version
	return bytes.Contains(out, []byte("-"+strings.TrimLeft(flag, "-")+" "))
}
