package node

import (
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/raftmq/raftmq/recovery"
	"github.com/raftmq/raftmq/vfs"
)

// metrics are the node's Prometheus metrics, in a private registry.
type metrics struct {
	reg         *prometheus.Registry
	sendMsgs    prometheus.Counter
	sendBytes   prometheus.Counter
	sendEntries prometheus.Counter
	sendErrors  prometheus.Counter
	sendLatency prometheus.Histogram
	batchSize   prometheus.Histogram
	stages      [numStages]prometheus.Observer
}

// Stages of a Send on the leader, for the latency breakdown
// (raftmq_produce_stage_seconds{stage}).
const (
	stageQueue    = iota // Send handed over → entry proposed (waiting for a slot and the batcher)
	stageFSMApply        // the FSM's decode and store append of the entry
	stageSend            // node.Send: validation, group commit, Raft commit, FSM apply
	numStages
)

var stageNames = [numStages]string{"queue", "fsm_apply", "send"}

func newMetrics(n *Node) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		sendMsgs: prometheus.NewCounter(prometheus.CounterOpts{Name: "raftmq_produce_messages_total",
			Help: "Messages committed through this leader's group commit."}),
		sendBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "raftmq_produce_entry_bytes_total",
			Help: "Bytes of MessageBatch entries proposed by this leader."}),
		sendEntries: prometheus.NewCounter(prometheus.CounterOpts{Name: "raftmq_produce_entries_total",
			Help: "MessageBatch entries proposed by this leader."}),
		sendErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "raftmq_produce_errors_total",
			Help: "MessageBatch entries that failed or whose outcome is unknown."}),
		sendLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "raftmq_produce_commit_seconds",
			Help: "Time from raft.Apply to the applied response of a MessageBatch.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "raftmq_produce_entry_messages",
			Help: "Messages per MessageBatch entry proposed by this leader's group commit.", Buckets: prometheus.ExponentialBuckets(1, 2, 17)}),
	}
	stages := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "raftmq_produce_stage_seconds",
		Help:    "Latency breakdown of a Send on the leader by stage: queue (until proposed), fsm_apply (per entry), send (whole node.Send). raftmq_produce_commit_seconds is raft.Apply to response.",
		Buckets: prometheus.ExponentialBuckets(0.00005, 2, 18)}, []string{"stage"})
	for i, name := range stageNames {
		m.stages[i] = stages.WithLabelValues(name)
	}
	m.reg.MustRegister(m.sendMsgs, m.sendBytes, m.sendEntries, m.sendErrors, m.sendLatency, m.batchSize, stages,
		&nodeCollector{n: n}, collectors.NewGoCollector())
	return m
}

func (m *metrics) observeSend(msgs, bytes int, d time.Duration, err error) {
	m.sendEntries.Inc()
	m.sendBytes.Add(float64(bytes))
	m.batchSize.Observe(float64(msgs))
	if err != nil {
		m.sendErrors.Inc()
		return
	}
	m.sendMsgs.Add(float64(msgs))
	m.sendLatency.Observe(d.Seconds())
}

func (m *metrics) observeStage(stage int, d time.Duration) { m.stages[stage].Observe(d.Seconds()) }

// nodeCollector reads store.Stats, raft.Stats and the FSM counters on scrape.
type nodeCollector struct{ n *Node }

type gauge struct {
	desc *prometheus.Desc
	kind prometheus.ValueType
}

func newGauge(name, help string, labels ...string) gauge {
	return gauge{prometheus.NewDesc("raftmq_"+name, help, labels, nil), prometheus.GaugeValue}
}

func newCounter(name, help string, labels ...string) gauge {
	return gauge{prometheus.NewDesc("raftmq_"+name, help, labels, nil), prometheus.CounterValue}
}

var (
	gCommitlogOffset = newGauge("commitlog_offset_bytes", "Commitlog offsets: min, max, confirm, flushed, checkpoint.", "kind")
	gFlushLag        = newGauge("commitlog_flush_lag_bytes", "Confirm offset minus flushed offset.")
	gStoreCount      = newCounter("store_total", "Store totals since open: messages, bytes, entries.", "kind")
	gStoreSize       = newGauge("store_objects", "Topics and queues.", "kind")
	gRecovery        = newGauge("store_recovery_seconds", "Duration of the last store recovery.", "mode")
	gRaftState       = newGauge("raft_state", "1 for the current Raft state.", "state")
	gRaftIndex       = newGauge("raft_index", "Raft indexes: term, commit, applied, last_log, last_snapshot, fsm_applied.", "kind")
	gFSMEntries      = newCounter("fsm_entries_total", "Entries given to the FSM by outcome.", "outcome")
	gReady           = newGauge("leader_ready", "1 when this node leads and its barrier passed.")
	gDiskWritten     = newCounter("disk_write_bytes_total", "Bytes this node wrote to disk by file: write()/pwrite bytes, plus the page-aligned cover of msync'd mmap ranges and pages dirtied by pre-touch (fallocate, truncate, directory syncs and the file system journal excluded).", "file")
)

var allGauges = []gauge{gCommitlogOffset, gFlushLag, gStoreCount, gStoreSize, gRecovery, gRaftState, gRaftIndex, gFSMEntries, gReady, gDiskWritten}

// Disk meter classes (raftmq_disk_write_bytes_total{file}). "raftlog" is
// not counted through vfs: the Raft log store writes its own files and
// reports RaftStore.WrittenBytes.
const (
	diskRaftLog      = "raftlog"
	diskCommitLog    = "commitlog"
	diskConsumeQueue = "consumequeue"
	diskIndex        = "index"
	diskCheckpoint   = "checkpoint"
	diskSnapshot     = "snapshot"
	diskOther        = "other" // rebuild and abort markers, anything new
)

// newDiskMeter is the meter of the files a node with cfg opens through its
// vfs: the store's queues, its checkpoint, Raft snapshots and a snapshot
// being installed (<store>.staging).
func newDiskMeter(cfg Config) *vfs.Meter {
	storeDir := filepath.Clean(cfg.storeConfig().Dir)
	snapDir := filepath.Join(cfg.Dir, "raft", "snapshots")
	staging := storeDir + ".staging"
	return vfs.NewMeter(func(name string) string {
		name = filepath.Clean(name)
		switch {
		case within(name, snapDir), within(name, staging):
			return diskSnapshot
		case strings.HasPrefix(filepath.Base(name), recovery.CheckpointName):
			return diskCheckpoint // and its .tmp
		}
		rel, err := filepath.Rel(storeDir, name)
		if err != nil {
			return diskOther
		}
		switch top, _, _ := strings.Cut(filepath.ToSlash(rel), "/"); top {
		case "commitlog":
			return diskCommitLog
		case "consumequeue":
			return diskConsumeQueue
		case "index":
			return diskIndex
		}
		return diskOther
	}, diskCommitLog, diskConsumeQueue, diskIndex, diskCheckpoint, diskSnapshot, diskOther)
}

// within reports whether path is dir or below it (both clean).
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+string(filepath.Separator))
}

func (c *nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, g := range allGauges {
		ch <- g.desc
	}
}

func (c *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	emit := func(g gauge, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(g.desc, g.kind, v, labels...)
	}
	s := c.n.Store().Stats()
	emit(gCommitlogOffset, float64(s.MinOffset), "min")
	emit(gCommitlogOffset, float64(s.MaxOffset), "max")
	emit(gCommitlogOffset, float64(s.ConfirmOffset), "confirm")
	emit(gCommitlogOffset, float64(s.FlushedOffset), "flushed")
	emit(gCommitlogOffset, float64(s.CheckpointOffset), "checkpoint")
	emit(gFlushLag, float64(s.ConfirmOffset-s.FlushedOffset))
	emit(gStoreCount, float64(s.Messages), "messages")
	emit(gStoreCount, float64(s.Bytes), "bytes")
	emit(gStoreCount, float64(s.Entries), "entries")
	emit(gStoreSize, float64(s.Topics), "topics")
	emit(gStoreSize, float64(s.Queues), "queues")
	emit(gRecovery, s.RecoveryDuration.Seconds(), s.RecoveryMode)
	state := c.n.raft.State()
	for _, st := range []raft.RaftState{raft.Follower, raft.Candidate, raft.Leader, raft.Shutdown} {
		v := 0.0
		if st == state {
			v = 1
		}
		emit(gRaftState, v, st.String())
	}
	rs := c.n.raft.Stats()
	for _, k := range []string{"term", "commit_index", "applied_index", "last_log_index", "last_snapshot_index"} {
		v, _ := strconv.ParseFloat(rs[k], 64)
		emit(gRaftIndex, v, k)
	}
	emit(gRaftIndex, float64(s.AppliedIndex), "fsm_applied")
	fs := c.n.fsm.Stats()
	emit(gFSMEntries, float64(fs.Applied), "applied")
	emit(gFSMEntries, float64(fs.Skipped), "skipped")
	emit(gFSMEntries, float64(fs.Rejected), "rejected")
	emit(gFSMEntries, float64(fs.Other), "other")
	ready := 0.0
	if c.n.isReady.Load() {
		ready = 1
	}
	emit(gReady, ready)
	emit(gDiskWritten, float64(c.n.bolt.WrittenBytes()), diskRaftLog)
	for _, class := range c.n.disk.Classes() {
		emit(gDiskWritten, float64(c.n.disk.Written(class)), class)
	}
}
