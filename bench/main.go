package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/raftmq/raftmq/internal/nodeproc"
)

// options of one bench run.
type options struct {
	Quick       bool
	Out         string         // directory for performance.md/.json
	Duration    time.Duration  // one measurement
	Reps        int            // A/B repetitions of every row
	Bolt        bool           // also measure raft-boltdb, the other Raft log store
	Baseline    string         // git revision to measure the two headline produce rows against (empty: none)
	Restart     int64          // commitlog bytes before the restart row
	Consume     int64          // messages the consume row reads at most
	Profile     bool           // capture leader CPU profiles (extra, unmeasured runs)
	Keep        bool           // keep data dirs and logs
	KeepLogs    string         // copy the restart matrix's node logs here (empty: none)
	Rows        *regexp.Regexp // only the A/B rows whose name matches (nil: all)
	GroupCommit string         // TOML lines of raftmq's [group_commit] table (raftmq only: the Raft settings stay shared)
	Steps       string         // comma-separated extra steps: halfmax,profile,consume,restart,restarts,scan ("all": every one)
	KillSizes   []int64        // the restart matrix's sizes (nil: 1, 4 and 16 GiB; -quick 8 and 32 MiB)
	KillCases   *regexp.Regexp // only the restart matrix's columns whose name matches (nil: all)
	Args        []string       // the command line, for the report
	Log         io.Writer      // progress
}

func defaultOptions(quick bool) options {
	o := options{Quick: quick, Duration: 4 * time.Second, Reps: 3, Bolt: true, Restart: 1 << 30,
		Consume: 600_000, Profile: true, Steps: "all", Log: os.Stderr}
	if quick {
		o.Duration, o.Reps, o.Bolt, o.Restart, o.Consume, o.Profile = 700*time.Millisecond, 1, false, 16<<20, 20_000, false
	}
	return o
}

func main() {
	quick := flag.Bool("quick", false, "smoke run: short measurements, one repetition, no raft-boltdb rows, 16 MiB restart")
	out := flag.String("out", "", "output directory (default: <module>/docs; -quick: a temp dir)")
	dur := flag.Duration("duration", 0, "one measurement (default 4s, -quick 700ms)")
	reps := flag.Int("reps", 0, "A/B repetitions per row (default 3, -quick 1)")
	bolt := flag.Bool("boltdb", true, "also measure raft-boltdb as the Raft log store (full run only; the rows' default is raft-wal, the node's)")
	baseline := flag.String("baseline", "", "git revision (e.g. 84a99e6) to build from a worktree and measure the async single-message and client-batched rows against, A/B in this run")
	keep := flag.Bool("keep", false, "keep the data directories and node logs")
	keepLogs := flag.String("keep-logs", "", "copy the restart matrix's node logs (info level) into this directory, one subdirectory per column, before its data is removed")
	rows := flag.String("rows", "", "only the A/B rows whose name matches this regexp (e.g. 'synchronous|pipelined'); the other steps then run only if -steps names them")
	steps := flag.String("steps", "", "extra steps after the A/B rows, comma-separated: halfmax,profile,consume,restart,restarts (kill -9 after 1, 4 and 16 GiB), scan (abnormal recovery scan vs read+CRC32C), all or none (default all; none with -rows)")
	gc := flag.String("group-commit", "", "TOML body of the raftmq nodes' [group_commit] table, e.g. 'max_in_flight = 32' (raftmq only)")
	render := flag.String("render", "", "only re-render performance.md from this performance.json (after editing bench/notes.md)")
	killSizes := flag.String("kill-sizes", "", "the restart matrix's sizes in MiB, comma-separated (default 1024,4096,16384; -quick 8,32)")
	killCases := flag.String("kill-cases", "", "only the restart matrix's columns whose name matches this regexp, e.g. 'single node, 1 KiB'")
	flag.Parse()
	if *render != "" {
		if err := rerender(*render); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	o := defaultOptions(*quick)
	if *dur > 0 {
		o.Duration = *dur
	}
	if *reps > 0 {
		o.Reps = *reps
	}
	o.Bolt = o.Bolt && *bolt
	o.Baseline = *baseline
	o.GroupCommit = *gc
	if *rows != "" {
		re, err := regexp.Compile(*rows)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: -rows:", err)
			os.Exit(2)
		}
		o.Rows, o.Steps = re, "none"
	}
	if *steps != "" {
		o.Steps = *steps
	}
	if *killSizes != "" {
		for _, f := range strings.Split(*killSizes, ",") {
			mib, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
			if err != nil || mib <= 0 {
				fmt.Fprintf(os.Stderr, "bench: -kill-sizes: %q is not a positive number of MiB\n", f)
				os.Exit(2)
			}
			o.KillSizes = append(o.KillSizes, mib<<20)
		}
	}
	if *killCases != "" {
		re, err := regexp.Compile(*killCases)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: -kill-cases:", err)
			os.Exit(2)
		}
		o.KillCases = re
	}
	o.Keep, o.KeepLogs, o.Out, o.Args = *keep, *keepLogs, *out, os.Args[1:]
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	rep, err := run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	fmt.Print(rep.table())
}

// rerender writes performance.md beside file from its JSON and the notes.
func rerender(file string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	root, err := nodeproc.ModuleRoot()
	if err != nil {
		return err
	}
	return rep.write(filepath.Dir(file), filepath.Join(root, "bench", "notes.md"))
}

// run does one whole bench and writes the report files.
func run(ctx context.Context, o options) (*report, error) {
	root, err := nodeproc.ModuleRoot()
	if err != nil {
		return nil, err
	}
	if o.Out == "" {
		if o.Quick {
			return nil, errors.New("-quick needs -out (it must not overwrite docs/)")
		}
		o.Out = filepath.Join(root, "docs")
		if o.Rows != nil || o.Steps != "all" {
			// A partial run must not replace the full report.
			if o.Out, err = os.MkdirTemp("", "raftmq-bench-out-"); err != nil {
				return nil, err
			}
			fmt.Fprintf(o.Log, "partial run: report in %s\n", o.Out)
		}
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	work, err := os.MkdirTemp("", "raftmq-bench-")
	if err != nil {
		return nil, err
	}
	r := &runner{o: o, work: work, started: time.Now()}
	defer r.cleanup()
	if err := r.build(root); err != nil {
		return nil, err
	}
	rep := newReport(o, root)
	if err := r.all(ctx, rep); err != nil {
		return rep, err
	}
	rep.Seconds = time.Since(r.started).Seconds()
	if err := rep.write(o.Out, filepath.Join(root, "bench", "notes.md")); err != nil {
		return rep, err
	}
	return rep, nil
}

// build builds raftmq-node and raftmq (nodeproc) and the ceiling binary.
func (r *runner) build(root string) error {
	r.logf("building binaries")
	bin, err := nodeproc.Build()
	if err != nil {
		return err
	}
	r.bin = bin
	r.ceilBin = filepath.Join(r.work, "ceiling")
	cmd := exec.Command("go", "build", "-trimpath", "-o", r.ceilBin, "./bench/ceiling")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./bench/ceiling: %w\n%s", err, out)
	}
	return nil
}

func (r *runner) logf(format string, args ...any) {
	fmt.Fprintf(r.o.Log, "[%6.1fs] %s\n", time.Since(r.started).Seconds(), fmt.Sprintf(format, args...))
}

// cleanup stops every cluster still running and removes the work dir
// unless asked to keep it.
func (r *runner) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r.stopClusters(ctx)
	if r.o.Keep {
		r.logf("kept data and logs in %s", r.work)
		return
	}
	_ = os.RemoveAll(r.work)
}

func (r *runner) stopClusters(ctx context.Context) {
	for _, c := range []*nodeproc.Cluster{r.mq, r.ceil} {
		if c != nil {
			if err := c.Stop(ctx); err != nil {
				r.logf("stopping a cluster: %v", err)
			}
		}
	}
	r.mq, r.ceil = nil, nil
}

func joinArgs(args []string) string {
	if len(args) == 0 {
		return "go run ./bench"
	}
	return "go run ./bench " + strings.Join(args, " ")
}
