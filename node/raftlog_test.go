package node

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// Raft's lines about an unreachable peer are WARN, its local faults stay
// ERROR, through Named and With as raft derives its loggers.
func TestPeerLoggerDemotesOnlyPeerErrors(t *testing.T) {
	var buf bytes.Buffer
	l := newPeerLogger(hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Trace})).Named("raft").With("node", "n1")
	l.Error("failed to appendEntries to", "peer", "n3", "error", "connection refused")
	l.Log(hclog.Error, "failed to decode incoming command", "error", "EOF")
	l.Error("failed to flush response", "error", "use of closed network connection")
	l.Error("failed to take snapshot", "error", "disk full")
	out := buf.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines:\n%s", len(lines), out)
	}
	for i, want := range []string{"[WARN]  raft: failed to appendEntries to", "[WARN]  raft: failed to decode incoming command", "[WARN]  raft: failed to flush response", "[ERROR] raft: failed to take snapshot"} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d %q, want %q", i, lines[i], want)
		}
	}
}
