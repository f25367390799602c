package node

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/raftmq/raftmq/transport"
	"github.com/raftmq/raftmq/vfs"
)

// A leader whose disk is at or above DiskWarningRatio refuses sends before
// proposing anything (transport.ErrDiskFull, RESOURCE_EXHAUSTED through
// the API, counted), keeps serving, and takes sends again once the disk has
// room. The disk is the store's MemFS with a capacity (vfs.FS.Space).
func TestSendRefusedWhileDiskFull(t *testing.T) {
	mem := vfs.NewMem()
	c := startClusterWith(t, 1, func(cfg *Config) { cfg.FS = mem })
	l := c.leader()
	c.send("before", 10)
	mem.SetCapacity(1 << 40)
	sp, err := mem.Space(l.cfg.Store.Dir)
	if err != nil {
		t.Fatal(err)
	}
	used := int64(sp.Total - sp.Free)
	mem.SetCapacity(used * 100 / 95) // 95 % used
	waitFor(t, "the store to see its disk full", 5*time.Second, func() bool {
		return l.Store().DiskUsedPercent() >= l.cfg.Store.DiskWarningRatio
	})
	before := l.Store().ConfirmOffset()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = l.Send(ctx, msgs("T", "refused", 3))
	if !errors.Is(err, transport.ErrDiskFull) {
		t.Fatalf("send on a full disk: %v, want ErrDiskFull", err)
	}
	t.Logf("refused: %v", err)
	if got := l.Store().ConfirmOffset(); got != before {
		t.Fatalf("a refused send changed the store: confirm offset %d -> %d", before, got)
	}
	mem.SetCapacity(used * 4) // 25 % used
	waitFor(t, "the store to see room again", 5*time.Second, func() bool {
		return l.Store().DiskUsedPercent() < l.cfg.Store.DiskWarningRatio
	})
	c.send("after", 10)
}
