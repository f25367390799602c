package node

import (
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/fsm"
	"github.com/raftmq/raftmq/vfs"
)

// failStagingWrites fails every write into a snapshot's staging directory
// (<store>.staging, store.InstallSnapshot) while armed, and counts them.
type failStagingWrites struct {
	armed atomic.Bool
	fired atomic.Int32
}

func (f *failStagingWrites) MaybeError(op vfs.Op) error {
	if !f.armed.Load() || op.Kind != vfs.OpWrite || !strings.Contains(op.Path, ".staging"+string(filepath.Separator)) {
		return nil
	}
	f.fired.Add(1)
	return vfs.ErrInjected
}

// A follower whose Restore of a received snapshot fails must not run on:
// Raft already stored the snapshot, and with NoSnapshotRestoreOnStart a
// restart would take its index as applied while the store is the old one —
// the follower then serves different data at the same offsets (a confirm
// offset of 2,846 against its peers' 513,056 in the reproduction). With the
// fix the FSM stops on the failed Restore, and at the next start the node
// restores the stored snapshot before Raft runs; it then leads and ends
// byte-identical.
func TestFailedSnapshotRestoreNeverDiverges(t *testing.T) {
	c := startCompactingCluster(t, 3)
	c.send("before", 10)
	c.assertIdentical()
	fi := c.followerIndex()
	behind := c.nodes[fi].raft.LastIndex()
	if err := c.nodes[fi].Close(); err != nil {
		t.Fatal(err)
	}
	c.nodes[fi] = nil
	c.compactPast(behind)
	want := snapshotConfirm(t, c.leader())

	inj := &failStagingWrites{}
	inj.armed.Store(true)
	c.cfgs[fi].FS = vfs.WithInjector(vfs.OS(), inj)
	c.nodes[fi] = c.start(fi)
	f := c.nodes[fi]
	// Before the fix the follower ran on, and the leader sent the snapshot
	// again (a second failed staging write); now the first failure stops it.
	var fatal error
	waitFor(t, "the follower to stop or to be sent the snapshot again", 45*time.Second, func() bool {
		select {
		case fatal = <-f.fatal:
			return true
		default:
			return inj.fired.Load() >= 2
		}
	})
	if err := f.Close(); err != nil {
		t.Logf("close after the failed restore: %v", err)
	}
	c.nodes[fi] = nil
	inj.armed.Store(false)
	t.Logf("follower: %d staging writes failed; node error: %v", inj.fired.Load(), fatal)

	// The received snapshot is on disk; the store is the old one.
	c.cfgs[fi].FS = nil
	c.nodes[fi] = c.start(fi)
	f = c.nodes[fi]
	if got := f.Store().ConfirmOffset(); got < want {
		t.Fatalf("restarted follower serves from confirm offset %d, below the snapshot's %d", got, want)
	}
	if !errors.Is(fatal, fsm.ErrFatal) {
		t.Fatalf("the follower ran on after a failed snapshot restore (node error %v)", fatal)
	}

	c.assertIdentical()

	// Change leader to the restarted follower and keep writing through it.
	// A transfer times out if the target is not caught up in time: retry.
	waitFor(t, f.cfg.ID+" to lead", 30*time.Second, func() bool {
		l := c.leader()
		if l == f {
			return true
		}
		err := l.raft.LeadershipTransferToServer(raft.ServerID(f.cfg.ID), raft.ServerAddress(f.RaftAddr())).Error()
		if err != nil {
			t.Logf("transfer to %s: %v", f.cfg.ID, err)
		}
		return false
	})
	c.send("after", 10)
	c.assertIdentical()
	c.verifyOffline()
}

// followerIndex is the index in c.nodes of a running node that does not lead.
func (c *cluster) followerIndex() int {
	c.t.Helper()
	l := c.leader()
	for i, n := range c.nodes {
		if n != nil && n != l {
			return i
		}
	}
	c.t.Fatal("no follower")
	return -1
}
