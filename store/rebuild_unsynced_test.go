package store

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/vfs"
)

// A rebuild of the consume queues after a snapshot install that a kill -9
// cut short leaves units in the page cache that no one synced. The next
// Open counted them as flushed, its rebuild skipped them, and the checkpoint
// then claimed them: a power loss afterwards zeroed them under the
// checkpoint (found by the chaos suite on lossyfs: kill-during-install-recv,
// then power loss; "unit 0 points at 0, which is not a message record").
// Here the cut-short rebuild is consume-queue files copied in without a
// sync, and the disk meter shows whether the rebuild's flush synced them.
func TestRebuildSyncsUnitsAnEarlierProcessLeft(t *testing.T) {
	cfg, dst := installedCopy(t, 200)
	// What a killed first rebuild wrote: the source's queue and index
	// files, not synced (os.WriteFile), where the rebuild puts them.
	for _, sub := range []string{filepath.Join(consumeQueueDir, "rb", "0"), indexDir} {
		if n := copyUnsynced(t, filepath.Join(cfg.Dir, sub), filepath.Join(dst.Dir, sub), nil); n == 0 {
			t.Fatalf("no source files in %s", sub)
		}
	}
	sep := string(filepath.Separator)
	m := vfs.NewMeter(func(name string) string {
		switch {
		case strings.Contains(name, sep+consumeQueueDir+sep):
			return "cq"
		case strings.Contains(name, sep+indexDir+sep):
			return "index"
		}
		return "other"
	}, "cq", "index", "other")
	s := mustOpen(t, vfs.Metered(vfs.OS(), m), dst)
	defer s.Close()
	entries := int64(200 * 20) // 200 units of 20 bytes; 200+ index entries of 20
	if got := m.Written("cq"); got < entries {
		t.Fatalf("the rebuild synced %d consume-queue bytes of the %d its units take: units an earlier process left unsynced stay unsynced under the checkpoint", got, entries)
	}
	if got := m.Written("index"); got < entries {
		t.Fatalf("the rebuild synced %d index bytes, less than its %d bytes of entries", got, entries)
	}
	if got, err := s.QueryByKey("rb", "k2", 4, 0, 1<<62); err != nil || len(got) != 1 {
		t.Fatalf("key of the first message after the rebuild: %v, %d hits", err, len(got))
	}
	if r, err := s.GetMessages("rb", 0, 0, 1, 0, ""); err != nil || r.Status != Found {
		t.Fatalf("first message after the rebuild: %v %v", err, r.Status)
	}
}

// installedCopy writes msgs messages to queue 0 of topic "rb" in a source
// store (header indexes 2.., key k<index>), installs a snapshot of it into a
// second store's directory and closes the source. It returns both configs;
// the destination has the commitlog and the rebuild marker, no queues.
func installedCopy(t *testing.T, msgs int) (src, dst Config) {
	t.Helper()
	src = smallConfig(filepath.Join(t.TempDir(), "src"))
	st := mustOpen(t, vfs.OS(), src)
	if err := st.CreateTopic(header(1), TopicConfig{Name: "rb", Queues: 1}); err != nil {
		t.Fatal(err)
	}
	for i := uint64(2); i < uint64(msgs)+2; i++ {
		if _, err := st.AppendMessages(header(i), []message.Message{testMessage("rb", 0, int(i), nil)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Flush(); err != nil {
		t.Fatal(err)
	}
	snap := st.CaptureSnapshot()
	segs, err := st.SegmentFiles(snap.ConfirmOffset)
	if err != nil {
		t.Fatal(err)
	}
	dst = smallConfig(filepath.Join(t.TempDir(), "dst"))
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
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return src, dst
}

// copyUnsynced copies every file of directory from into to without a sync
// (os.WriteFile), as a process killed before its flush leaves them; mangle,
// if set, may change the bytes of the i-th file first. It returns how many
// files it copied.
func copyUnsynced(t *testing.T, from, to string, mangle func(i int, b []byte)) int {
	t.Helper()
	names, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, n := range names {
		b, err := os.ReadFile(filepath.Join(from, n.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if mangle != nil {
			mangle(i, b)
		}
		if err := os.WriteFile(filepath.Join(to, n.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return len(names)
}
