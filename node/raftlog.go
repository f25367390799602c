package node

import (
	"strings"

	"github.com/hashicorp/go-hclog"
)

// peerLogger is the logger node gives hashicorp/raft and its transport.
// Raft logs at ERROR, on every retry, that it could not reach a peer or
// that a peer's connection broke mid-command. A peer being stopped,
// restarted, partitioned or having lost an election is the normal course
// of a rolling restart or a failover, so those lines, which are about the
// remote side, are logged at WARN: ERROR stays for a local fault an
// operator must act on (a log store or snapshot that fails, corruption).
type peerLogger struct{ hclog.Logger }

// peerMessages are raft's ERROR messages about reaching a peer.
var peerMessages = []string{
	"failed to appendEntries to", "failed to heartbeat to", "failed to make requestVote RPC",
	"failed to pipeline appendEntries", "failed to start pipeline replication to",
	"failed to decode incoming command", "peer has newer term, stopping replication",
	// The answer to a peer's command could not be written: the peer hung
	// up, or this node's transport closed the connection on shutdown.
	"failed to flush response",
}

func isPeerMessage(msg string) bool {
	for _, m := range peerMessages {
		if strings.HasPrefix(msg, m) {
			return true
		}
	}
	return false
}

func newPeerLogger(l hclog.Logger) hclog.Logger { return peerLogger{l} }

func (l peerLogger) Error(msg string, args ...any) {
	if isPeerMessage(msg) {
		l.Logger.Warn(msg, args...)
		return
	}
	l.Logger.Error(msg, args...)
}

func (l peerLogger) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Error && isPeerMessage(msg) {
		level = hclog.Warn
	}
	l.Logger.Log(level, msg, args...)
}

func (l peerLogger) Named(name string) hclog.Logger { return peerLogger{l.Logger.Named(name)} }
func (l peerLogger) ResetNamed(name string) hclog.Logger {
	return peerLogger{l.Logger.ResetNamed(name)}
}
func (l peerLogger) With(args ...any) hclog.Logger { return peerLogger{l.Logger.With(args...)} }
