package node

import (
	"sync"
	"time"

	gometrics "github.com/hashicorp/go-metrics"
	gmprom "github.com/hashicorp/go-metrics/prometheus"
	"github.com/prometheus/client_golang/prometheus"
)

// hashicorp/raft reports its own metrics (commit and apply times,
// AppendEntries and snapshot timings, FSM apply, leader contacts) to
// go-metrics' process-wide global, so their Prometheus sink is the one
// piece of process-wide state here: installed once, collected by every
// node's registry as raftmq_raft_* (e.g. raftmq_raft_commitTime). In a
// process that runs several nodes (tests) they share these series.
var raftSink struct {
	once sync.Once
	sink *gmprom.PrometheusSink
	err  error
}

// raftMetricsSink returns the process's sink of hashicorp/raft's metrics,
// installing it as go-metrics' global on first use.
func raftMetricsSink() (*gmprom.PrometheusSink, error) {
	raftSink.once.Do(func() {
		// The sink registers itself; keep it off the global default
		// registry (each node's registry collects it).
		own := prometheus.NewRegistry()
		raftSink.sink, raftSink.err = gmprom.NewPrometheusSinkFrom(gmprom.PrometheusOpts{
			Expiration: time.Minute, Registerer: own, Name: "raftmq_raft_metrics"})
		if raftSink.err != nil {
			return
		}
		cfg := gometrics.DefaultConfig("raftmq")
		cfg.EnableHostname = false       // no host name in metric names
		cfg.EnableRuntimeMetrics = false // the Go collector has them
		_, raftSink.err = gometrics.NewGlobal(cfg, raftSink.sink)
	})
	return raftSink.sink, raftSink.err
}
