package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/raftmq/raftmq/internal/nodeproc"
	"github.com/raftmq/raftmq/vfs"
)

// runner owns the clusters of one bench run.
type runner struct {
	o       options
	work    string
	started time.Time
	bin     nodeproc.Binaries
	ceilBin string
	mq      *nodeproc.Cluster // raftmq
	ceil    *nodeproc.Cluster // bare raft
	variant string            // log store of the running clusters
}

// Summary is one measurement: the `raftmq bench --json` summary, which the
// ceiling answers in the same shape.
type Summary struct {
	Count    int64   `json:"count"`
	Seconds  float64 `json:"seconds"`
	MsgsPerS float64 `json:"msgs_per_s"`
	MBPerS   float64 `json:"mb_per_s"`
	P50      float64 `json:"p50_ms"`
	P99      float64 `json:"p99_ms"`
	P999     float64 `json:"p999_ms"`
	Max      float64 `json:"max_ms"`
	Errors   int64   `json:"errors"`
	FirstErr string  `json:"first_error,omitempty"`
	// DiskBytes is write_bytes of /proc/PID/io of each node process over
	// the run (the bench fills it in; the CLI does not know).
	DiskBytes []int64 `json:"disk_bytes,omitempty"`
	// WriteAmp is the largest DiskBytes over the acknowledged message body
	// bytes (Count × message size): disk bytes per body byte per node.
	WriteAmp float64 `json:"write_amp,omitempty"`
	// DiskByFile is what the busiest node (the one WriteAmp counts) wrote
	// by file class over the run, from its raftmq_disk_write_bytes_total;
	// empty for the ceiling, which has no such meter.
	DiskByFile map[string]int64 `json:"disk_by_file,omitempty"`
}

// diskMeter reads write_bytes of every node process of c (and the nodes'
// disk meters, where they have one) now; done reads them again and fills
// s.DiskBytes, s.WriteAmp and s.DiskByFile for msgSize-byte messages. A
// process whose /proc/PID/io cannot be read (it restarted, or no
// accounting) leaves the summary without them.
func diskMeter(c *nodeproc.Cluster) (done func(s *Summary, msgSize int)) {
	before := make([]int64, len(c.Nodes))
	pids := make([]int, len(c.Nodes))
	filesBefore := scrapeDiskFiles(c)
	ok := true
	for i, n := range c.Nodes {
		pids[i] = n.PID()
		var err error
		if before[i], err = vfs.ProcessWriteBytes(pids[i]); err != nil {
			ok = false
		}
	}
	return func(s *Summary, msgSize int) {
		if !ok {
			return
		}
		disk := make([]int64, len(c.Nodes))
		for i, n := range c.Nodes {
			after, err := vfs.ProcessWriteBytes(pids[i])
			if err != nil || n.PID() != pids[i] {
				return
			}
			disk[i] = after - before[i]
		}
		s.DiskBytes = disk
		if body := s.Count * int64(msgSize); body > 0 {
			s.WriteAmp = float64(slices.Max(disk)) / float64(body)
		}
		busiest := slices.Index(disk, slices.Max(disk))
		s.DiskByFile = diskFilesDelta(filesBefore, scrapeDiskFiles(c), busiest)
	}
}

// storeTOML is the [store] table of the raftmq nodes' config: the
// defaults (none) in a full run; in a quick run, which asserts no speeds,
// nodeproc's small store files, so that the bench's three clusters take
// about 1.5 GB of a disk that CI shares with other tests instead of 14 GB.
func (o options) storeTOML() string {
	if o.Quick {
		return nodeproc.SmallStoreTOML
	}
	return ""
}

// startClusters starts a raftmq and a ceiling cluster whose Raft log store
// is logStore; both get the same config file.
func (r *runner) startClusters(ctx context.Context, logStore string) error {
	dir := filepath.Join(r.work, logStore)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, sub := range []string{"raftmq", "ceiling"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return err
		}
	}
	conf := filepath.Join(dir, "raft.toml")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("[raft]\nlog_store = %q\n", logStore)), 0o644); err != nil {
		return err
	}
	args := []string{"--config", conf, "--log-level", "warn"}
	mqArgs := args
	if r.o.GroupCommit != "" || r.o.Quick {
		mqConf := filepath.Join(dir, "raftmq.toml")
		body := fmt.Sprintf("[raft]\nlog_store = %q\n", logStore)
		if r.o.GroupCommit != "" {
			body += fmt.Sprintf("[group_commit]\n%s\n", r.o.GroupCommit)
		}
		body += r.o.storeTOML()
		if err := os.WriteFile(mqConf, []byte(body), 0o644); err != nil {
			return err
		}
		mqArgs = []string{"--config", mqConf, "--log-level", "warn"}
	}
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	r.logf("starting 3-node raftmq cluster (%s)", logStore)
	mq, err := nodeproc.StartCluster(sctx, r.bin, nodeproc.ClusterOptions{N: 3, Dir: filepath.Join(dir, "raftmq"), Args: mqArgs})
	if err != nil {
		return fmt.Errorf("raftmq cluster: %w", err)
	}
	r.mq = mq
	r.logf("starting 3-node bare-raft ceiling cluster (%s)", logStore)
	ceil, err := nodeproc.StartCluster(sctx, nodeproc.Binaries{Node: r.ceilBin}, nodeproc.ClusterOptions{N: 3, Dir: filepath.Join(dir, "ceiling"), Args: args, NoAnnounce: true})
	if err != nil {
		return fmt.Errorf("ceiling cluster: %w", err)
	}
	r.ceil, r.variant = ceil, logStore
	for _, t := range []string{topic1K, topic16K} {
		if _, err := r.cli(ctx, "topic", "create", t, "--queues", "8"); err != nil {
			return err
		}
	}
	return nil
}

const (
	topic1K  = "bench1k"
	topic16K = "bench16k"
)

func topicFor(size int) string {
	if size >= 16<<10 {
		return topic16K
	}
	return topic1K
}

// cli runs the raftmq CLI against the raftmq cluster.
func (r *runner) cli(ctx context.Context, args ...string) ([]byte, error) {
	out, err := r.mq.CLI(ctx, args...)
	if err != nil {
		return out, fmt.Errorf("raftmq %v: %w: %s", args, err, out)
	}
	return out, nil
}

// load is the shape of one produce measurement.
type load struct {
	Size     int     // message bytes
	Conc     int     // producers (ceiling: appliers = Conc*InFlight)
	Batch    int     // messages per send (ceiling entry = Size*Batch)
	InFlight int     // pipelined sends per producer
	Rate     float64 // open loop, messages/s (raftmq only)
}

// produce runs `raftmq bench produce` with l for d.
func (r *runner) produce(ctx context.Context, l load, d time.Duration) (Summary, error) {
	return r.produceOn(ctx, r.mq, l, d)
}

// produceOn is produce against cluster c (the current raftmq or a baseline).
func (r *runner) produceOn(ctx context.Context, c *nodeproc.Cluster, l load, d time.Duration) (Summary, error) {
	args := []string{"--json", "bench", "produce", "-t", topicFor(l.Size), "-n", "0", "--duration", d.String(),
		"-s", strconv.Itoa(l.Size), "-c", strconv.Itoa(l.Conc), "--batch", strconv.Itoa(l.Batch),
		"--inflight", strconv.Itoa(l.InFlight)}
	if l.Rate > 0 {
		args = append(args, "--rate", strconv.FormatFloat(l.Rate, 'f', 0, 64))
	}
	done := diskMeter(c)
	s, err := cliSummary(ctx, c, args...)
	done(&s, l.Size)
	return s, err
}

// cliSummary runs the CLI against c and parses its JSON summary; a run with
// errors still yields its summary (Errors > 0).
func cliSummary(ctx context.Context, c *nodeproc.Cluster, args ...string) (Summary, error) {
	out, err := c.CLI(ctx, args...)
	var s Summary
	found := false
	var other [][]byte
	for _, line := range bytes.Split(out, []byte("\n")) {
		if !found && bytes.HasPrefix(line, []byte("{")) && json.Unmarshal(line, &s) == nil {
			found = true
		} else if len(bytes.TrimSpace(line)) > 0 {
			other = append(other, line)
		}
	}
	if !found {
		return s, fmt.Errorf("raftmq %v: no summary (%v): %s", args, err, out)
	}
	if err != nil {
		s.FirstErr = string(bytes.Join(other, []byte(" ")))
	}
	return s, nil
}

// ceiling runs the bare-raft load on the ceiling leader.
func (r *runner) ceiling(ctx context.Context, l load, d time.Duration) (Summary, error) {
	var s Summary
	i, err := r.ceil.Leader(ctx)
	if err != nil {
		return s, err
	}
	q := url.Values{"size": {strconv.Itoa(l.Size * l.Batch)}, "c": {strconv.Itoa(l.Conc * l.InFlight)}, "duration": {d.String()}}
	if l.Rate > 0 { // open loop: one entry per batch
		q.Set("rate", strconv.FormatFloat(l.Rate/float64(l.Batch), 'f', 3, 64))
	}
	u := "http://" + r.ceil.Nodes[i].Spec().HTTPAddr + "/run?" + q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return s, err
	}
	done := diskMeter(r.ceil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return s, fmt.Errorf("ceiling run: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return s, fmt.Errorf("ceiling run: HTTP %d: %s", resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, &s); err != nil {
		return s, fmt.Errorf("ceiling run: %w: %s", err, body)
	}
	// The ceiling counts entries; report messages so rows compare like for like.
	s.MsgsPerS *= float64(l.Batch)
	s.Count *= int64(l.Batch)
	done(&s, l.Size)
	return s, nil
}

// leaderProfile fetches a CPU profile of the raftmq leader for d into
// file, while fn runs.
func (r *runner) leaderProfile(ctx context.Context, d time.Duration, file string, fn func() error) error {
	i, err := r.mq.Leader(ctx)
	if err != nil {
		return err
	}
	secs := max(1, int(d.Seconds()))
	u := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", r.mq.Nodes[i].Spec().HTTPAddr, secs)
	got := make(chan error, 1)
	go func() { got <- fetch(ctx, u, file) }()
	ferr := fn()
	return errorsJoin(ferr, <-got)
}

func fetch(ctx context.Context, u, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d", u, resp.StatusCode)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, resp.Body)
	return errorsJoin(err, f.Close())
}
