package node

import (
	"encoding/json"
	"net/http"
	"net/http/pprof"
	"strconv"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/raftmq/raftmq/dashboard"
	"github.com/raftmq/raftmq/wire"
)

func (n *Node) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", n.handleHealthz)
	mux.HandleFunc("GET /status", n.handleStatus)
	mux.Handle("GET /metrics", promhttp.HandlerFor(n.metrics.reg, promhttp.HandlerOpts{}))
	// GET / and /api/: the web dashboard, reading through the node's own
	// gRPC service (its forwarding and leader reads included).
	// With --auth-file the dashboard and pprof need the admin role
	// (security.requireAdmin); /healthz, /status and /metrics stay open.
	admin := http.NewServeMux()
	dashboard.New(dashboard.Options{API: n.api, Metrics: n.metrics.reg, Logger: n.log.Named("dashboard")}).Register(admin)
	// Profiling (CPU, heap, goroutines, mutex, block) for the bench and
	// operators; the HTTP address is a management port, not the client API.
	admin.HandleFunc("/debug/pprof/", pprof.Index)
	admin.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	admin.HandleFunc("/debug/pprof/profile", pprof.Profile)
	admin.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	admin.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.Handle("/", n.sec.requireAdmin(admin))
	return mux
}

// Serving reports whether the node serves: the store is open, Raft knows a
// leader, and if this node is the leader its barrier has passed.
func (n *Node) Serving() bool {
	if _, id := n.raft.LeaderWithID(); id == "" {
		return false
	}
	if n.raft.State() == raft.Leader && !n.isReady.Load() {
		return false
	}
	return n.Store().ConfirmOffset() >= 0
}

func (n *Node) handleHealthz(w http.ResponseWriter, _ *http.Request) {
	if !n.Serving() {
		http.Error(w, "not serving", http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}

// StatusJSON is the body of GET /status (documented in README.md); test harnesses
// decode it with this type.
type StatusJSON struct {
	ID             string       `json:"id"`
	State          string       `json:"state"`
	Ready          bool         `json:"ready"`
	LeaderID       string       `json:"leaderId"`
	LeaderRaftAddr string       `json:"leaderRaftAddr"`
	LeaderAPIAddr  string       `json:"leaderApiAddr"`
	Term           uint64       `json:"term"`
	CommitIndex    uint64       `json:"commitIndex"`
	AppliedIndex   uint64       `json:"appliedIndex"`
	ConfirmOffset  int64        `json:"confirmOffset"`
	MinOffset      int64        `json:"minOffset"`
	MaxOffset      int64        `json:"maxOffset"`
	Members        []MemberJSON `json:"members"`
	// LastSnapshotIndex is the Raft index of this node's newest snapshot.
	LastSnapshotIndex uint64 `json:"lastSnapshotIndex"`
}

// MemberJSON is one entry of StatusJSON.Members.
type MemberJSON struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raftAddr"`
	APIAddr  string `json:"apiAddr"`
	Suffrage string `json:"suffrage"`
}

func toStatusJSON(s wire.ClusterStatus, ready bool) StatusJSON {
	out := StatusJSON{ID: s.ID, State: s.State, Ready: ready, LeaderID: s.LeaderID,
		LeaderRaftAddr: s.LeaderRaftAddr, LeaderAPIAddr: s.LeaderAPIAddr, Term: s.Term,
		CommitIndex: s.CommitIndex, AppliedIndex: s.AppliedIndex, ConfirmOffset: s.ConfirmOffset,
		MinOffset: s.MinOffset, MaxOffset: s.MaxOffset, Members: []MemberJSON{}}
	for _, m := range s.Members {
		out.Members = append(out.Members, MemberJSON(m))
	}
	return out
}

func (n *Node) handleStatus(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	out := toStatusJSON(n.Status(), n.Serving())
	out.LastSnapshotIndex, _ = strconv.ParseUint(n.raft.Stats()["last_snapshot_index"], 10, 64)
	_ = enc.Encode(out)
}
