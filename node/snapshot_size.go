package node

import (
	"errors"
	"time"

	"github.com/hashicorp/raft"
)

// minTrailingLogs is the fewest entries TrailingBytes may leave behind a
// snapshot: a follower a moment behind still catches up from the log.
const minTrailingLogs = 64

// snapshotBySize takes a Raft snapshot whenever the FSM says the log applied
// since the last one reached Raft.SnapshotBytes. hashicorp/raft counts
// entries and time only; with entries of up to GroupCommit.MaxBytes, 8192
// entries can be gigabytes that a node restarted after kill -9 reads back
// (and the FSM skips) before it serves.
func (n *Node) snapshotBySize() {
	if n.cfg.Raft.SnapshotBytes <= 0 {
		return
	}
	for {
		select {
		case <-n.stop:
			return
		case <-n.fsm.SnapshotDue():
		}
		bytes, entries := n.fsm.LogSinceSnapshot()
		if bytes < n.cfg.Raft.SnapshotBytes {
			continue // another trigger took a snapshot meanwhile
		}
		n.sizeTrailingLogs(bytes, entries)
		started := time.Now()
		err := n.raft.Snapshot().Error()
		switch {
		case err == nil:
			n.log.Info("snapshot by log size", "bytes", bytes, "entries", entries, "duration", time.Since(started))
		case errors.Is(err, raft.ErrNothingNewToSnapshot), errors.Is(err, raft.ErrRaftShutdown):
		default:
			n.log.Warn("snapshot by log size failed", "bytes", bytes, "error", err)
		}
	}
}

// sizeTrailingLogs sets the entries kept behind the next snapshot so that
// they hold about Raft.TrailingBytes, never more than Raft.TrailingLogs nor
// fewer than minTrailingLogs. bytes and entries describe the log since the
// last snapshot (its mean entry size stands for the kept part).
func (n *Node) sizeTrailingLogs(bytes, entries int64) {
	limit := n.cfg.Raft.TrailingBytes
	if limit <= 0 || entries <= 0 || bytes <= 0 {
		return
	}
	want := trailingLogsFor(limit, bytes/entries, n.cfg.Raft.TrailingLogs)
	rc := n.raft.ReloadableConfig()
	if rc.TrailingLogs == want {
		return
	}
	rc.TrailingLogs = want
	if err := n.raft.ReloadConfig(rc); err != nil {
		n.log.Warn("cannot resize trailing logs", "trailing_logs", want, "error", err)
		return
	}
	n.log.Debug("trailing logs sized by bytes", "trailing_logs", want, "mean_entry_bytes", bytes/entries)
}

// trailingLogsFor is limit bytes over meanEntry, within [minTrailingLogs,
// maxCount].
func trailingLogsFor(limit, meanEntry int64, maxCount uint64) uint64 {
	n := uint64(limit / max(meanEntry, 1))
	return min(max(n, minTrailingLogs), max(maxCount, minTrailingLogs))
}
