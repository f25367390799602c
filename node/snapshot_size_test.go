package node

import (
	"fmt"
	"testing"
	"time"
)

func TestTrailingLogsFor(t *testing.T) {
	for _, c := range []struct {
		limit, mean int64
		maxCount    uint64
		want        uint64
	}{
		{256 << 20, 1 << 20, 10240, 256},   // 1 MiB entries: 256 kept
		{256 << 20, 1 << 10, 10240, 10240}, // small entries: the count rules
		{1 << 20, 1 << 20, 10240, minTrailingLogs},
		{1 << 20, 0, 10240, 10240},
		{1 << 30, 1, 10, minTrailingLogs}, // a count below the floor
	} {
		if got := trailingLogsFor(c.limit, c.mean, c.maxCount); got != c.want {
			t.Errorf("trailingLogsFor(%d, %d, %d) = %d, want %d", c.limit, c.mean, c.maxCount, got, c.want)
		}
	}
}

// With entry- and time-based triggers out of reach, a snapshot is still
// taken once SnapshotBytes of log were applied, and the log kept behind it
// is sized by TrailingBytes: what a restart after kill -9 reads is bounded.
func TestSnapshotByLogSize(t *testing.T) {
	c := startClusterWith(t, 3, func(cfg *Config) {
		cfg.Raft.SnapshotThreshold, cfg.Raft.SnapshotInterval = 1<<40, time.Hour
		cfg.Raft.TrailingLogs = 10240
		cfg.Raft.SnapshotBytes, cfg.Raft.TrailingBytes = 512<<10, 1<<10
	})
	const entries = 120 // ~24 KiB each: about 2.8 MiB of log, 5 snapshots' worth
	// A send that fails (a leader change on a loaded machine) is sent again.
	deadline := time.Now().Add(60 * time.Second)
	for sent, try := 0, 0; sent < entries; try++ {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d entries sent in 60 s", sent, entries)
		}
		if err := c.sendBig(fmt.Sprintf("s%d-%d", sent, try), 3, 8<<10); err != nil {
			t.Logf("entry %d: %v", sent, err)
			continue
		}
		sent++
	}
	c.assertIdentical()
	for _, n := range c.nodes {
		// The trigger runs on its own goroutine: wait for the state it
		// leads to, then check it.
		why := ""
		waitFor(t, n.cfg.ID+" to snapshot by size and compact its log", 20*time.Second, func() bool {
			first, _ := n.bolt.FirstIndex()
			last := n.raft.LastIndex()
			bytes, _ := n.fsm.LogSinceSnapshot()
			why = fmt.Sprintf("snapshot index %d, log [%d, %d], %d bytes since the snapshot", raftStat(n, "last_snapshot_index"), first, last, bytes)
			return raftStat(n, "last_snapshot_index") > 0 && first > 1 && last-first+1 < entries && bytes < 512<<10
		})
		t.Logf("%s: %s", n.cfg.ID, why)
		if got := n.raft.ReloadableConfig().TrailingLogs; got != minTrailingLogs {
			t.Errorf("%s: trailing logs %d, want %d (1 KiB of ~24 KiB entries, floored)", n.cfg.ID, got, minTrailingLogs)
		}
	}
}
