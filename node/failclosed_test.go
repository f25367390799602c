package node

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/vfs"
)

// failSyncsWhileArmed fails every file sync under the store while armed.
type failSyncsWhileArmed struct {
	armed atomic.Bool
	fired atomic.Int32
}

func (f *failSyncsWhileArmed) MaybeError(op vfs.Op) error {
	if !f.armed.Load() || op.Kind != vfs.OpSync {
		return nil
	}
	f.fired.Add(1)
	return fmt.Errorf("%w: EIO on sync %s", vfs.ErrInjected, op.Path)
}

// A follower whose store fails a sync stops (the store fails closed and
// tells the node), so no checkpoint can claim what the failed sync lost;
// restarted, it recovers from disk, catches up and ends byte-identical.
func TestSyncFailureStopsNode(t *testing.T) {
	c := startCluster(t, 3)
	c.send("before", 10)
	c.assertIdentical()
	fi := c.followerIndex()
	inj := &failSyncsWhileArmed{}
	if err := c.nodes[fi].Close(); err != nil {
		t.Fatal(err)
	}
	c.cfgs[fi].FS = vfs.WithInjector(vfs.OS(), inj)
	c.nodes[fi] = c.start(fi)
	f := c.nodes[fi]
	inj.armed.Store(true)
	var fatal error
	waitFor(t, "the follower to stop on a failed sync", 30*time.Second, func() bool {
		c.send("during", 2) // gives the follower something to flush
		if err := f.Store().Flush(); err != nil && !errors.Is(err, store.ErrFailedClosed) {
			t.Logf("flush: %v", err)
		}
		select {
		case fatal = <-f.fatal:
			return true
		default:
			return false
		}
	})
	if !errors.Is(fatal, store.ErrFailedClosed) || inj.fired.Load() == 0 {
		t.Fatalf("node error %v after %d failed syncs, want store.ErrFailedClosed", fatal, inj.fired.Load())
	}
	if err := f.Close(); err == nil {
		t.Fatal("close after a failed sync reported no error")
	}
	c.nodes[fi] = nil
	inj.armed.Store(false)
	c.cfgs[fi].FS = nil
	c.nodes[fi] = c.start(fi)
	if plan := c.nodes[fi].Store().RecoveryPlan(); plan.Mode.String() != "abnormal" {
		t.Fatalf("restart after a failed sync ran %s recovery, want abnormal (the abort file stays)", plan.Mode)
	}
	c.send("after", 10)
	c.assertIdentical()
	c.verifyOffline()
}
