package store

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/raftmq/raftmq/consumequeue"
	"github.com/raftmq/raftmq/message"
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
	cfg := smallConfig(filepath.Join(t.TempDir(), "src"))
	src := mustOpen(t, vfs.OS(), cfg)
	if err := src.CreateTopic(header(1), TopicConfig{Name: "rb", Queues: 1}); err != nil {
		t.Fatal(err)
	}
	for i := uint64(2); i < msgs+2; i++ {
		if _, err := src.AppendMessages(header(i), []message.Message{testMessage("rb", 0, int(i), nil)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := src.Flush(); err != nil {
		t.Fatal(err)
	}
	snap := src.CaptureSnapshot()
	segs, err := src.SegmentFiles(snap.ConfirmOffset)
	if err != nil {
		t.Fatal(err)
	}
	dst := smallConfig(filepath.Join(t.TempDir(), "dst"))
	next := func() (int64, io.Reader, bool, error) {
		if len(segs) == 0 {
			return 0, nil, false, nil
		}
		seg := segs[0]
		segs = segs[1:]
		b, err := os.ReadFile(seg.Path)
		if err != nil {
			return 0, nil, false, err
		}
		return seg.Start, bytes.NewReader(b[:min(int64(len(b)), snap.ConfirmOffset-seg.Start)]), true, nil
	}
	if err := InstallSnapshot(vfs.OS(), dst, snap, next); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(consumeQueueDir, "rb", "0")
	from, to := filepath.Join(cfg.Dir, sub), filepath.Join(dst.Dir, sub)
	names, err := os.ReadDir(from)
	if err != nil || len(names) != 4 {
		t.Fatalf("source queue files: %v, %d, want 4", err, len(names))
	}
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, n := range names {
		b, err := os.ReadFile(filepath.Join(from, n.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			clear(b[:10*consumequeue.UnitSize]) // the page the power loss dropped
		}
		if err := os.WriteFile(filepath.Join(to, n.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
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
