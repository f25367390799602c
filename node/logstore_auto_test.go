package node

import (
	"errors"
	"path/filepath"
	"testing"
)

// The default log store ("auto") starts a new log with raft-wal and keeps
// the kind an existing data dir holds; an explicit kind that contradicts
// the dir is still refused.
func TestLogStoreAutoKeepsTheDirsKind(t *testing.T) {
	if got := DefaultConfig().Raft.LogStore; got != LogStoreAuto {
		t.Fatalf("default log_store %q, want %q", got, LogStoreAuto)
	}
	fresh := t.TempDir()
	if got := ResolveLogStore(LogStoreAuto, fresh); got != LogStoreWAL {
		t.Fatalf("new dir: %q, want %q", got, LogStoreWAL)
	}
	for _, kind := range []string{LogStoreBolt, LogStoreWAL} {
		dir := filepath.Join(t.TempDir(), "raft")
		st, err := OpenRaftStore(kind, dir, nil)
		must(t, err)
		must(t, storeWALBatch(st, 1, 3))
		must(t, st.Close())
		for _, auto := range []string{LogStoreAuto, ""} {
			if got := ResolveLogStore(auto, dir); got != kind {
				t.Fatalf("%s dir opened as %q: %q", kind, auto, got)
			}
			st, err := OpenRaftStore(auto, dir, nil)
			must(t, err)
			checkWAL(t, st, 3)
			must(t, st.Close())
		}
		other := LogStoreWAL
		if kind == LogStoreWAL {
			other = LogStoreBolt
		}
		if _, err := OpenRaftStore(other, dir, nil); !errors.Is(err, ErrLogStoreMismatch) {
			t.Fatalf("%s dir opened as %s: %v, want ErrLogStoreMismatch", kind, other, err)
		}
	}
}
