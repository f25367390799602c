package store

import (
	"path/filepath"
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
