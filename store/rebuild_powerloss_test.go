package store

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/raftmq/raftmq/consumequeue"
	"github.com/raftmq/raftmq/vfs"
)

// A rebuild after a snapshot install that a kill -9 cut short, then a power
// loss before anything synced its units: the consume-queue files (created
// synced, at full size) survive, but pages of units in them read as zeros
// or are torn at 512-byte sectors. Consume-queue recovery checks only the
// newest files, so holes in an older file were taken for written units; the
// next rebuild skipped them (Put is idempotent below MaxOffset), synced the
// zeros and checkpointed them (chaos seed 20261219: "consume queue chaos/3:
// unit 0..9 and 984..999 point at 0, which is not a message record").
// Here the cut-short rebuild is the source's four queue files copied in,
// with the first 10 units of the oldest one zeroed as the power loss left
// them.
func TestRebuildRewritesUnitsAPowerLossZeroed(t *testing.T) {
	const msgs = 200 // 64 units a file: four files, recovery scans from the second
	cfg, dst := installedCopy(t, msgs)
	sub := filepath.Join(consumeQueueDir, "rb", "0")
	n := copyUnsynced(t, filepath.Join(cfg.Dir, sub), filepath.Join(dst.Dir, sub), func(i int, b []byte) {
		if i == 0 {
			clear(b[:10*consumequeue.UnitSize]) // the page the power loss dropped
		}
	})
	if n != 4 {
		t.Fatalf("%d source queue files, want 4", n)
	}
	s := mustOpen(t, vfs.OS(), dst)
	defer s.Close()
	for off := int64(0); off < msgs; off++ {
		r, err := s.GetMessages("rb", 0, off, 1, 0, "")
		if err != nil || r.Status != Found {
			t.Fatalf("message at queue offset %d after the rebuild: %v %v", off, err, r.Status)
		}
	}
}

// A repair of a queue whose files were lost, cut short before its units
// were synced, then a power loss: the repaired files survive, but a page of
// an older one reads as zeros. The next start sees the newest file full,
// so the queue no longer lags, and served units that point at 0. The
// repair now leaves the rebuild marker before it writes, so that start
// rebuilds every queue. Here every consume-queue sync of the first start
// fails (the repair's units stay unsynced), and the power loss is the
// queue files as the repair wrote them, the first 10 units zeroed.
func TestRepairOfLostQueueRedoneAfterPowerLoss(t *testing.T) {
	const msgs = 200 // four queue files of 64 units
	cfg, _ := installedCopy(t, msgs)
	sub := filepath.Join(cfg.Dir, consumeQueueDir, "rb", "0")
	written := t.TempDir() // what the repair writes: the same units
	if n := copyUnsynced(t, sub, written, nil); n != 4 {
		t.Fatalf("%d queue files, want 4", n)
	}
	if err := os.RemoveAll(sub); err != nil {
		t.Fatal(err)
	}
	sep := string(filepath.Separator)
	var failed atomic.Int64
	failQueueSyncs := vfs.WithInjector(vfs.OS(), vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind == vfs.OpSync && strings.Contains(op.Path, sep+consumeQueueDir+sep) {
			failed.Add(1)
			return fmt.Errorf("%w: EIO on %s %s", vfs.ErrInjected, op.Kind, op.Path)
		}
		return nil
	}))
	if s, err := Open(failQueueSyncs, cfg); err == nil {
		s.Close() // its flush fails too; the abort file stays
	}
	if failed.Load() == 0 {
		t.Fatal("no consume-queue sync was attempted after the repair: the fault did not happen")
	}
	if err := os.RemoveAll(sub); err != nil {
		t.Fatal(err)
	}
	copyUnsynced(t, written, sub, func(i int, b []byte) {
		if i == 0 {
			clear(b[:10*consumequeue.UnitSize]) // the page the power loss dropped
		}
	})
	s := mustOpen(t, vfs.OS(), cfg)
	defer s.Close()
	for off := int64(0); off < msgs; off++ {
		r, err := s.GetMessages("rb", 0, off, 1, 0, "")
		if err != nil || r.Status != Found {
			t.Fatalf("message at queue offset %d after the power loss: %v %v", off, err, r.Status)
		}
	}
}
