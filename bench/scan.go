package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"

	"github.com/raftmq/raftmq/internal/nodeproc"
)

// targetScanRatio: abnormal recovery's verifying scan of the commitlog at
// ≥ 0.8 × reading and CRC32C-ing the same bytes.
const targetScanRatio = 0.80

// scanBench is the store benchmark the scan step runs: recovery's verifying
// scan, a read+CRC32C pass and a CRC32C pass through fresh mappings of the
// same commitlog, alternating inside every op (store/recovery_bench_test.go),
// and the whole abnormal recovery (scan and rebuild of the consume queues
// and index) against the same read+CRC32C pass.
const scanBench = "^BenchmarkRecovery(Scan)?Paired$"

// scan runs scanBench on a 1 GiB commitlog (128 MiB in a quick run) in its
// own process and reports the medians of its runs.
func (r *runner) scan(ctx context.Context, rep *report) error {
	root, err := nodeproc.ModuleRoot()
	if err != nil {
		return err
	}
	count, benchtime, big := "3", "3x", "1"
	if r.o.Quick {
		count, benchtime, big = "1", "1x", "0"
	}
	r.logf("abnormal recovery scan against read+CRC32C (go test -bench '%s' ./store)", scanBench)
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", scanBench, "-benchtime", benchtime, "-count", count, "./store")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "RAFTMQ_BENCH_BIG="+big)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go test -bench %s ./store: %w\n%s", scanBench, err, out)
	}
	scan := benchMetrics(string(out), "BenchmarkRecoveryScanPaired")
	whole := benchMetrics(string(out), "BenchmarkRecoveryPaired")
	mb := medianOf(scan["commitlog-MB"])
	if mb == 0 || len(whole["recovery-GB/s"]) == 0 {
		return fmt.Errorf("go test -bench %s ./store: no metrics in\n%s", scanBench, out)
	}
	size := fmt.Sprintf("%.0f MB of commitlog", mb)
	scanRate, readRate := medianOf(scan["scan-GB/s"]), medianOf(scan["ceiling-GB/s"])
	rep.Rows = append(rep.Rows,
		Row{Name: "abnormal recovery: verifying scan (frames, CRC32C) vs read+CRC32C of the files, " + size,
			LogStore: "-", Metric: "GB/s", Raftmq: scanRate, Ceiling: readRate, Ratio: ratio(scanRate, readRate),
			Target: fmt.Sprintf("ratio ≥ %.2f", targetScanRatio), Result: passIf(ratio(scanRate, readRate) >= targetScanRatio)},
		Row{Name: "abnormal recovery: verifying scan vs CRC32C through fresh mappings of the segments, " + size,
			LogStore: "-", Metric: "GB/s", Raftmq: scanRate, Ceiling: medianOf(scan["mapped-GB/s"]),
			Ratio: ratio(scanRate, medianOf(scan["mapped-GB/s"])), Target: "-", Result: "info"},
		Row{Name: "abnormal recovery, whole (scan, consume queues and index rebuilt) vs read+CRC32C, " + size,
			LogStore: "-", Metric: "GB/s", Raftmq: medianOf(whole["recovery-GB/s"]), Ceiling: medianOf(whole["ceiling-GB/s"]),
			Ratio: ratio(medianOf(whole["recovery-GB/s"]), medianOf(whole["ceiling-GB/s"])), Target: "-", Result: "info"})
	return nil
}

// benchMetrics collects, from go test -bench output, every "value unit"
// pair of the result lines of the named benchmark, by unit.
func benchMetrics(out, name string) map[string][]float64 {
	m := map[string][]float64{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || (f[0] != name && !strings.HasPrefix(f[0], name+"-")) {
			continue
		}
		for i := 2; i+1 < len(f); i += 2 { // f[1] is the op count
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				m[f[i+1]] = append(m[f[i+1]], v)
			}
		}
	}
	return m
}

// medianOf is the median of v (0 when empty).
func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
