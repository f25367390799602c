package main

import (
	"bufio"
	"bytes"
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/raftmq/raftmq/internal/nodeproc"
)

// diskFileSeries is the node's disk meter: bytes written by file class
// (raftlog, commitlog, consumequeue, index, checkpoint, snapshot, other).
const diskFileSeries = `raftmq_disk_write_bytes_total{file="`

// parseDiskFiles reads the disk meter's series out of a /metrics body.
func parseDiskFiles(body []byte) map[string]int64 {
	out := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, diskFileSeries)
		if !ok {
			continue
		}
		file, value, ok := strings.Cut(rest, `"} `)
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		out[file] = int64(v)
	}
	return out
}

// scrapeDiskFiles reads every node's disk meter; nil for a node that does
// not export one (the ceiling) or cannot be reached.
func scrapeDiskFiles(c *nodeproc.Cluster) []map[string]int64 {
	out := make([]map[string]int64, len(c.Nodes))
	for i, n := range c.Nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		body, err := n.Get(ctx, "/metrics")
		cancel()
		if err != nil {
			continue
		}
		if m := parseDiskFiles(body); len(m) > 0 {
			out[i] = m
		}
	}
	return out
}

// diskFilesDelta is what node i wrote by file class between two scrapes;
// nil if either scrape lacks it.
func diskFilesDelta(before, after []map[string]int64, i int) map[string]int64 {
	if i >= len(before) || i >= len(after) || before[i] == nil || after[i] == nil {
		return nil
	}
	d := make(map[string]int64, len(after[i]))
	for file, v := range after[i] {
		d[file] = v - before[i][file]
	}
	return d
}

// diskFileClasses lists the classes of rows' runs in a fixed order: the
// node's own classes first, then any other, sorted.
func diskFileClasses(rows []Row) []string {
	known := []string{"raftlog", "commitlog", "consumequeue", "index", "checkpoint", "snapshot", "other"}
	seen := map[string]bool{}
	for _, r := range rows {
		for _, s := range r.RaftmqRuns {
			for file := range s.DiskByFile {
				seen[file] = true
			}
		}
	}
	var out []string
	for _, k := range known {
		if seen[k] {
			out = append(out, k)
			delete(seen, k)
		}
	}
	return append(out, slices.Sorted(maps.Keys(seen))...)
}

// fileAmp is what s's busiest node wrote to file per acknowledged body byte
// of size-byte messages (0 when unmeasured).
func fileAmp(s Summary, file string, size int) float64 {
	body := s.Count * int64(size)
	if body <= 0 || s.DiskByFile == nil {
		return 0
	}
	return float64(s.DiskByFile[file]) / float64(body)
}

// diskFilesTable renders, for every raftmq row with a metered load, the
// busiest node's disk bytes per body byte by file class (medians of runs).
func diskFilesTable(rows []Row) string {
	classes := diskFileClasses(rows)
	if len(classes) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\nWrite amp by file: the busiest raftmq node's `raftmq_disk_write_bytes_total{file}` over the run per acknowledged body byte (medians). The node counts write() bytes and the page-aligned cover of each msync'd range, so a row's sum differs from the kernel's write_bytes above (which also counts the file system's own writes and a page each time a clean mapped page is dirtied).\n\n")
	b.WriteString("| row | log store | " + strings.Join(classes, " | ") + " | sum |\n|---|---|" + strings.Repeat("---:|", len(classes)+1) + "\n")
	for _, r := range rows {
		if r.Load == nil || len(r.RaftmqRuns) == 0 || r.RaftmqRuns[0].DiskByFile == nil {
			continue
		}
		cells := make([]string, 0, len(classes)+1)
		sum := 0.0
		for _, file := range classes {
			v := median(r.RaftmqRuns, func(s Summary) float64 { return fileAmp(s, file, r.Load.Size) })
			sum += v
			cells = append(cells, strconv.FormatFloat(v, 'f', 3, 64))
		}
		cells = append(cells, strconv.FormatFloat(sum, 'f', 2, 64))
		b.WriteString("| " + r.Name + " | " + r.LogStore + " | " + strings.Join(cells, " | ") + " |\n")
	}
	return b.String()
}
