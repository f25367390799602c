package node

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"

	"github.com/raftmq/raftmq/message"
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
	// refusedDiskFull counts sends refused because the disk is at or
	// above DiskWarningRatio.
	refusedDiskFull prometheus.Counter
	sendLatency     prometheus.Histogram
	batchSize       prometheus.Histogram
	stages          [numStages]prometheus.Observer
	// topicMsgs counts the messages acknowledged by this leader per topic.
	topicMsgs *prometheus.CounterVec
	// grpc counts and times the API's RPCs by method and code.
	grpc *grpcprom.ServerMetrics
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
		refusedDiskFull: prometheus.NewCounter(prometheus.CounterOpts{Name: "raftmq_produce_refused_disk_full_total",
			Help: "Sends this leader refused because its disk was at or above [store] DiskWarningRatio."}),
		sendLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "raftmq_produce_commit_seconds",
			Help: "Time from raft.Apply to the applied response of a MessageBatch.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "raftmq_produce_entry_messages",
			Help: "Messages per MessageBatch entry proposed by this leader's group commit.", Buckets: prometheus.ExponentialBuckets(1, 2, 17)}),
		topicMsgs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "raftmq_topic_produced_messages_total",
			Help: "Messages acknowledged by this node as leader, per topic."}, []string{"topic"}),
		grpc: grpcprom.NewServerMetrics(grpcprom.WithServerCounterOptions(grpcprom.WithNamespace("raftmq")),
			grpcprom.WithServerHandlingTimeHistogram(grpcprom.WithHistogramNamespace("raftmq"),
				grpcprom.WithHistogramBuckets(prometheus.ExponentialBuckets(0.0001, 2, 18)))),
	}
	stages := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "raftmq_produce_stage_seconds",
		Help:    "Latency breakdown of a Send on the leader by stage: queue (until proposed), fsm_apply (per entry), send (whole node.Send). raftmq_produce_commit_seconds is raft.Apply to response.",
		Buckets: prometheus.ExponentialBuckets(0.00005, 2, 18)}, []string{"stage"})
	for i, name := range stageNames {
		m.stages[i] = stages.WithLabelValues(name)
	}
	m.reg.MustRegister(m.sendMsgs, m.sendBytes, m.sendEntries, m.sendErrors, m.refusedDiskFull, m.sendLatency, m.batchSize, stages,
		m.topicMsgs, m.grpc, &nodeCollector{n: n}, collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(schedLatencies)),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{Namespace: "raftmq"}))
	if sink, err := raftMetricsSink(); err != nil {
		n.log.Warn("hashicorp/raft metrics are not exported", "error", err)
	} else {
		m.reg.MustRegister(sink)
	}
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

// schedLatencies adds the Go scheduler's latency histogram
// (go_sched_latencies_seconds: how long goroutines waited, runnable, to
// run) to the Go collector's defaults: a send passes through several
// goroutines on every node, and on a machine whose cores the nodes share
// those waits add up in the tail.
var schedLatencies = collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/sched/latencies:seconds$`)}

func (m *metrics) observeStage(stage int, d time.Duration) { m.stages[stage].Observe(d.Seconds()) }

// grpcServerOptions are the API server's metrics interceptors
// (raftmq_grpc_server_handled_total{grpc_method,grpc_code} and
// raftmq_grpc_server_handling_seconds).
func (m *metrics) grpcServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(m.grpc.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(m.grpc.StreamServerInterceptor())}
}

// observeTopics counts acknowledged msgs per topic (a Send mostly carries
// one topic: one counter update per run of equal topics).
func (m *metrics) observeTopics(msgs []message.Message) {
	for i := 0; i < len(msgs); {
		j := i + 1
		for j < len(msgs) && msgs[j].Topic == msgs[i].Topic {
			j++
		}
		m.topicMsgs.WithLabelValues(msgs[i].Topic).Add(float64(j - i))
		i = j
	}
}

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
	gCommitlogOffset = newGauge("commitlog_offset_bytes", "Commitlog offsets: min, max, confirm, flushed, checkpoint, touched (faulted in ahead of the writer).", "kind")
	gFlushLag        = newGauge("commitlog_flush_lag_bytes", "Confirm offset minus flushed offset.")
	gStoreMessages   = newCounter("store_messages_total", "Messages this node's store appended since it opened.")
	gStoreBytes      = newCounter("store_bytes_total", "Commitlog bytes this node's store appended since it opened.")
	gStoreEntries    = newCounter("store_entries_total", "Raft entries this node's store applied since it opened.")
	gStoreSize       = newGauge("store_objects", "Topics and queues.", "kind")
	gRecovery        = newGauge("store_recovery_seconds", "Duration of the last store recovery.", "mode")
	gRaftState       = newGauge("raft_state", "1 for the current Raft state.", "state")
	gRaftTerm        = newGauge("raft_term", "The node's current Raft term.")
	gRaftIndex       = newGauge("raft_index", "Raft indexes: commit, applied, last_log, last_snapshot, fsm_applied.", "kind")
	gFSMEntries      = newCounter("fsm_entries_total", "Entries given to the FSM by outcome.", "outcome")
	gReady           = newGauge("leader_ready", "1 when this node leads and its barrier passed.")
	gTopicConsumed   = newCounter("topic_consumed_messages_total", "Messages this node's API answered pulls with, per topic.", "topic")
	gGroupLag        = newGauge("group_lag_messages", "Messages a consumer group has still to read per queue of the topics it committed offsets in: max offset - committed offset (floored at 0), or max - min where it committed none; from this node's store at scrape time.", "group", "topic", "queue")
	gDiskUsed        = newGauge("disk_used_ratio", "Used share (0..1) of the file system holding the store, as df counts it; 0 when unknown. Sends are refused at [store] DiskWarningRatio.")
	gSpaceWaits      = newCounter("fsm_space_waits_total", "Entries whose apply waited for disk space (the store's disk was full; the FSM reopens the store and retries until there is room).")
	gWaitingSpace    = newGauge("fsm_waiting_for_space", "1 while the FSM waits for disk space to apply an entry.")
	gCorruptions     = newCounter("corruption_total", "Reads this node refused because what they would serve is damaged: a record, the CRC32C of its entry, or a consume-queue unit its record contradicts. Counted by the store opened last (it starts at 0 when the store is reopened or a snapshot installed).")
	gRebuildPending  = newGauge("store_rebuild_pending", "1 when a read found a consume queue or the index damaged: the rebuild marker is written and the next start rebuilds them from the commitlog.")
	gRemoting        = newCounter("remoting_requests_total", "RocketMQ protocol requests (broker and name server) by outcome: served (every request), stored (sends stored here), relayed (sends relayed to the leader), pulled (pulls answered), failed (answered with an error code), unsupported (a code not served), retried and dead_lettered (messages consumers sent back, stored in a %RETRY% or a %DLQ% topic).", "outcome")
	gRefused         = newCounter("refused_requests_total", "Requests refused by security and quotas: unauthenticated or not permitted on the gRPC API (denied) or the RocketMQ broker protocol (remoting_denied), over a quota on either (quota, remoting_quota), Raft connections whose mutual-TLS handshake failed (raft_tls).", "reason")
	gDedupHits       = newCounter("dedup_hits_total", "Messages of idempotent producers (PSEQ) answered as duplicates of a sequence stored before: nothing written, the first copy's result returned. Counted by the store opened last.")
	gDedupProducers  = newGauge("dedup_producers", "Idempotent producers in the store's producer table (seen within the producer expiry).")
	gSchedPending    = newGauge("scheduled_pending_messages", "Delayed messages stored and not yet delivered to their topics (replicated state: the same on every replica at the same applied index).")
	gSchedDelivered  = newCounter("scheduled_delivered_total", "Delayed messages this node's store delivered to their topics (DeliverDue entries applied) since it opened.")
	gDiskWritten     = newCounter("disk_write_bytes_total", "Bytes this node wrote to disk by file: write()/pwrite bytes, plus the page-aligned cover of msync'd mmap ranges (fallocate, truncate, directory syncs and the file system journal excluded).", "file")
)

var allGauges = []gauge{gCommitlogOffset, gFlushLag, gStoreMessages, gStoreBytes, gStoreEntries, gStoreSize, gRecovery,
	gRaftState, gRaftTerm, gRaftIndex, gFSMEntries, gReady, gTopicConsumed, gGroupLag, gDiskUsed, gSpaceWaits, gWaitingSpace, gCorruptions, gRebuildPending, gDiskWritten, gRemoting, gRefused, gDedupHits, gDedupProducers, gSchedPending, gSchedDelivered}

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
	emit(gCommitlogOffset, float64(s.TouchedOffset), "touched")
	emit(gCommitlogOffset, float64(s.CheckpointOffset), "checkpoint")
	emit(gFlushLag, float64(s.ConfirmOffset-s.FlushedOffset))
	emit(gStoreMessages, float64(s.Messages))
	emit(gStoreBytes, float64(s.Bytes))
	emit(gStoreEntries, float64(s.Entries))
	emit(gStoreSize, float64(s.Topics), "topics")
	emit(gStoreSize, float64(s.Queues), "queues")
	emit(gRecovery, s.RecoveryDuration.Seconds(), s.RecoveryMode)
	emit(gCorruptions, float64(s.Corruptions))
	emit(gRebuildPending, boolGauge(s.RebuildPending))
	emit(gDedupHits, float64(s.DedupHits))
	emit(gDedupProducers, float64(s.Producers))
	emit(gSchedPending, float64(s.ScheduledPending))
	emit(gSchedDelivered, float64(s.Delivered))
	emit(gDiskUsed, float64(c.n.Store().DiskUsedPercent())/100)
	state := c.n.raft.State()
	for _, st := range []raft.RaftState{raft.Follower, raft.Candidate, raft.Leader, raft.Shutdown} {
		v := 0.0
		if st == state {
			v = 1
		}
		emit(gRaftState, v, st.String())
	}
	rs := c.n.raft.Stats()
	term, _ := strconv.ParseFloat(rs["term"], 64)
	emit(gRaftTerm, term)
	for _, k := range []string{"commit_index", "applied_index", "last_log_index", "last_snapshot_index"} {
		v, _ := strconv.ParseFloat(rs[k], 64)
		emit(gRaftIndex, v, k)
	}
	emit(gRaftIndex, float64(s.AppliedIndex), "fsm_applied")
	fs := c.n.fsm.Stats()
	emit(gFSMEntries, float64(fs.Applied), "applied")
	emit(gFSMEntries, float64(fs.Skipped), "skipped")
	emit(gFSMEntries, float64(fs.Rejected), "rejected")
	emit(gFSMEntries, float64(fs.Other), "other")
	emit(gSpaceWaits, float64(fs.SpaceWaits))
	emit(gWaitingSpace, boolGauge(fs.WaitingForSpace))
	emit(gReady, boolGauge(c.n.isReady.Load()))
	if c.n.api != nil {
		for topic, v := range c.n.api.Stats().PulledByTopic {
			emit(gTopicConsumed, float64(v), topic)
		}
	}
	for _, g := range c.n.Store().GroupProgress("", "") {
		emit(gGroupLag, float64(g.Lag), g.Group, g.Topic, strconv.Itoa(int(g.QueueID)))
	}
	bs := c.n.BrokerStats()
	for outcome, v := range map[string]uint64{"served": bs.Requests, "stored": bs.Sends, "relayed": bs.Relayed,
		"failed": bs.Failed, "unsupported": bs.Unsupported, "pulled": bs.Pulls,
		"retried": bs.Retried, "dead_lettered": bs.DeadLettered} {
		emit(gRemoting, float64(v), outcome)
	}
	if c.n.api != nil {
		gs := c.n.api.GuardStats()
		emit(gRefused, float64(gs.Denied), "denied")
		emit(gRefused, float64(gs.Limited), "quota")
	}
	emit(gRefused, float64(bs.Denied), "remoting_denied")
	emit(gRefused, float64(bs.Limited), "remoting_quota")
	emit(gRefused, float64(c.n.trans.TLSHandshakeFailures()), "raft_tls")
	emit(gDiskWritten, float64(c.n.bolt.WrittenBytes()), diskRaftLog)
	for _, class := range c.n.disk.Classes() {
		emit(gDiskWritten, float64(c.n.disk.Written(class)), class)
	}
}

// boolGauge is 1 for true.
func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
