package node

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/meta"
)

// TestDedupSettingsReplicated: the leader's [dedup] settings become every
// replica's (a SetDedup entry), and a later leader with other settings
// replaces them.
func TestDedupSettingsReplicated(t *testing.T) {
	c := startClusterWith(t, 3, func(cfg *Config) {
		cfg.Dedup = Dedup{Window: 64, ProducerExpiry: 90 * time.Second}
	})
	want := meta.DedupConfig{Window: 64, Expiry: 90_000}
	l := c.leader()
	waitFor(t, "every replica to apply the leader's dedup settings", 10*time.Second, func() bool {
		for _, n := range c.nodes {
			if n.Store().DedupConfig() != want {
				return false
			}
		}
		return true
	})
	// Another leader with another window: its settings win.
	var next *Node
	for _, n := range c.nodes {
		if n != l {
			next = n
			break
		}
	}
	next.cfg.Dedup.Window = 128
	if err := l.raft.LeadershipTransferToServer(raft.ServerID(next.cfg.ID), raft.ServerAddress(next.RaftAddr())).Error(); err != nil {
		t.Fatalf("transfer: %v", err)
	}
	want.Window = 128
	waitFor(t, "the new leader's window on every replica", 15*time.Second, func() bool {
		for _, n := range c.nodes {
			if n.Store().DedupConfig() != want {
				return false
			}
		}
		return true
	})
}
