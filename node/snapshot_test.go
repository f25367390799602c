package node

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/verify"
	"github.com/raftmq/raftmq/vfs"
)

// compactingConfig keeps few log entries behind a snapshot, and takes
// snapshots only when the test asks (raft.Snapshot).
func compactingConfig(c *Config) {
	c.Raft.TrailingLogs = 8
	c.Raft.SnapshotThreshold = 16
	c.Raft.SnapshotInterval = time.Hour
	c.Raft.SnapshotRetain = 2
}

func startCompactingCluster(t *testing.T, size int) *cluster {
	return startClusterWith(t, size, compactingConfig)
}

// compactPast writes until no running node's log holds index keep+1 any
// more, snapshotting every node explicitly, and returns the smallest of
// their snapshot indexes. Writes that fail (a leader change on a slow
// machine) are retried in the next round.
func (c *cluster) compactPast(keep uint64) uint64 {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for round := 0; ; round++ {
		if time.Now().After(deadline) {
			c.t.Fatalf("logs not compacted past %d", keep)
		}
		for i := range 20 {
			// ~0.5 MiB a round: segments of 256 KiB roll.
			if err := c.sendBig(fmt.Sprintf("c%d-%d", round, i), 3, 8<<10); err != nil {
				c.t.Logf("round %d: %v", round, err)
				break
			}
		}
		if idx, ok := c.snapshotAll(keep); ok {
			return idx
		}
	}
}

// snapshotAll snapshots every running node and reports whether each log
// now starts after keep+1, with the smallest snapshot index.
func (c *cluster) snapshotAll(keep uint64) (uint64, bool) {
	minIdx, ok := uint64(0), true
	for _, n := range c.nodes {
		if n == nil {
			continue
		}
		f := n.raft.Snapshot()
		if err := f.Error(); err != nil {
			c.t.Logf("snapshot on %s: %v", n.cfg.ID, err) // e.g. a config entry not applied yet
			return 0, false
		}
		meta, rc, err := f.Open()
		if err != nil {
			c.t.Fatal(err)
		}
		rc.Close()
		if minIdx == 0 || meta.Index < minIdx {
			minIdx = meta.Index
		}
		if first, err := n.bolt.FirstIndex(); err != nil || first <= keep+1 {
			ok = false
		}
	}
	return minIdx, ok
}

// snapStats sums the snapshot store counters of the running nodes.
func (c *cluster) snapStats() (linked, opened, copied uint64) {
	for _, n := range c.nodes {
		if n != nil {
			st := n.snaps.Stats()
			linked, opened, copied = linked+st.LinkedCreated, opened+st.Opened, copied+st.CopiedSegments
		}
	}
	return linked, opened, copied
}

// sendBig sends n messages with bodies of size bytes through the leader.
func (c *cluster) sendBig(prefix string, n, size int) error {
	c.t.Helper()
	ms := msgs("T", prefix, n)
	for i := range ms {
		ms[i].Body = append(ms[i].Body, bytes.Repeat([]byte{byte(i)}, size)...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.leader().Send(ctx, ms)
	if err != nil {
		return fmt.Errorf("send %s: %w", prefix, err)
	}
	for _, r := range res {
		if r.Err != nil {
			c.t.Fatalf("send %s: %v", prefix, r.Err) // a deterministic refusal: a bug
		}
	}
	return nil
}

func raftStat(n *Node, key string) uint64 {
	v, _ := strconv.ParseUint(n.raft.Stats()[key], 10, 64)
	return v
}

// verifyOffline closes every node and runs verify.Stores over all data dirs
// (each consistent, replicas byte-identical up to the common confirm).
func (c *cluster) verifyOffline() {
	c.t.Helper()
	var dirs []string
	for i, n := range c.nodes {
		if n == nil {
			continue
		}
		if err := n.Close(); err != nil {
			c.t.Fatalf("close %s: %v", n.cfg.ID, err)
		}
		c.nodes[i] = nil
		dirs = append(dirs, c.cfgs[i].Dir)
	}
	var report bytes.Buffer
	if err := verify.Stores(vfs.OS(), dirs, &report); err != nil {
		c.t.Fatalf("verify: %v\n%s", err, report.String())
	}
}

// A follower stopped while the leader compacts its log past it catches up
// through InstallSnapshot (the leader streams its linked segments), ends
// byte-identical and keeps serving writes.
func TestFollowerCatchesUpThroughSnapshot(t *testing.T) {
	c := startCompactingCluster(t, 3)
	c.send("before", 10)
	c.assertIdentical()
	l := c.leader()
	fi := 0
	for i, n := range c.nodes {
		if n != l {
			fi = i
		}
	}
	behind := c.nodes[fi].raft.LastIndex()
	if err := c.nodes[fi].Close(); err != nil {
		t.Fatal(err)
	}
	c.nodes[fi] = nil

	snapIndex := c.compactPast(behind)
	linked, opened, copied := c.snapStats()
	if linked < 2 || copied != 0 {
		t.Fatalf("snapshots not taken by links: %d linked, %d segments copied", linked, copied)
	}

	c.nodes[fi] = c.start(fi)
	f := c.nodes[fi]
	waitFor(t, "the follower to install a snapshot", 30*time.Second, func() bool {
		return f.snaps.Stats().StreamsReceived > 0 && raftStat(f, "last_snapshot_index") >= snapIndex
	})
	c.assertIdentical()
	if _, got, _ := c.snapStats(); got <= opened+f.snaps.Stats().Opened {
		t.Fatalf("no leader opened a snapshot to stream (opened %d → %d)", opened, got)
	}
	if idx, _ := f.Store().Applied(); idx < snapIndex {
		t.Fatalf("follower applied index %d < snapshot %d", idx, snapIndex)
	}
	t.Logf("follower: snapshots %+v, fsm %+v, raft last_snapshot_index %d (leader snapshot %d)",
		f.snaps.Stats(), f.FSMStats(), raftStat(f, "last_snapshot_index"), snapIndex)

	if files, err := c.leader().Store().SegmentFiles(snapshotConfirm(t, c.leader())); err != nil || len(files) < 2 {
		t.Fatalf("only %d segment(s) (%v): the snapshot streamed too little to test", len(files), err)
	}

	c.send("after", 10) // keeps serving writes
	c.assertIdentical()
	// The installed store recovers like any other after a restart.
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	c.nodes[fi] = nil
	c.send("after-restart", 10)
	c.nodes[fi] = c.start(fi)
	c.assertIdentical()
	c.verifyOffline()
}

// A brand-new node joining a cluster whose log starts after index 1 can only
// get the early entries from a snapshot.
func TestNewNodeJoinsCompactedCluster(t *testing.T) {
	c := startCompactingCluster(t, 3)
	c.send("before", 10)
	snapIndex := c.compactPast(1)

	cfg := testConfig(t, "n4")
	compactingConfig(&cfg)
	cfg.Join = c.leader().APIAddr()
	c.cfgs = append(c.cfgs, cfg)
	c.nodes = append(c.nodes, c.start(3))
	n4 := c.nodes[3]
	waitFor(t, "n4 to become a voter", 30*time.Second, func() bool {
		srv, ok, _ := c.leader().server("n4")
		return ok && srv.Suffrage == raft.Voter
	})
	waitFor(t, "n4 to install the snapshot", 30*time.Second, func() bool {
		return n4.snaps.Stats().StreamsReceived > 0 && raftStat(n4, "last_snapshot_index") >= snapIndex
	})
	c.send("after", 10)
	c.assertIdentical()
	c.verifyOffline()
}

// snapshotConfirm is the confirm offset of n's newest snapshot.
func snapshotConfirm(t *testing.T, n *Node) int64 {
	t.Helper()
	metas, err := n.snaps.List()
	if err != nil || len(metas) == 0 {
		t.Fatalf("no snapshot on %s: %v", n.cfg.ID, err)
	}
	h, err := n.snaps.ReadHeader(metas[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	return h.Store.ConfirmOffset
}
