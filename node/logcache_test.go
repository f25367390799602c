package node

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/raft"
)

// countingLogs counts the reads that reach the log store.
type countingLogs struct {
	raft.LogStore
	gets atomic.Int64
}

func (c *countingLogs) GetLog(idx uint64, l *raft.Log) error {
	c.gets.Add(1)
	return c.LogStore.GetLog(idx, l)
}

// TestCachedLogsServeRecentEntries: Raft's reads of the newest entries (to
// replicate and to apply them) are served from memory, older ones from the
// store, and raft-wal stays a MonotonicLogStore behind the cache (the
// InstallSnapshot patches of the raft fork depend on it).
func TestCachedLogsServeRecentEntries(t *testing.T) {
	st := &countingLogs{LogStore: raft.NewInmemStore()}
	logs := CachedLogs(st)
	n := uint64(raftLogCacheEntries + 10)
	for i := uint64(1); i <= n; i++ {
		if err := logs.StoreLogs([]*raft.Log{{Index: i, Term: 1, Data: []byte{byte(i)}}}); err != nil {
			t.Fatal(err)
		}
	}
	var l raft.Log
	for i := n - raftLogCacheEntries + 1; i <= n; i++ {
		if err := logs.GetLog(i, &l); err != nil || l.Index != i || l.Data[0] != byte(i) {
			t.Fatalf("entry %d: %+v %v", i, l, err)
		}
	}
	if got := st.gets.Load(); got != 0 {
		t.Fatalf("%d reads of the newest %d entries reached the store", got, raftLogCacheEntries)
	}
	if err := logs.GetLog(1, &l); err != nil || l.Index != 1 || st.gets.Load() != 1 {
		t.Fatalf("an old entry: %+v %v, %d store reads", l, err, st.gets.Load())
	}

	wal, err := OpenRaftStore(LogStoreWAL, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer wal.Close()
	if m, ok := CachedLogs(wal).(raft.MonotonicLogStore); !ok || !m.IsMonotonic() {
		t.Fatal("raft-wal behind the cache is not a MonotonicLogStore")
	}
}

// TestLogCacheDeleteRangeKeepsOtherEntries: DeleteRange invalidates only
// the cached entries it deletes (the fork's patch 9); v1.8.0 emptied the
// whole cache, and an entry staged for replication but not yet stored then
// read as missing.
func TestLogCacheDeleteRangeKeepsOtherEntries(t *testing.T) {
	inner := &countingLogs{LogStore: raft.NewInmemStore()}
	c, err := raft.NewLogCache(16, inner)
	if err != nil {
		t.Fatal(err)
	}
	var logs []*raft.Log
	for i := uint64(1); i <= 10; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte{byte(i)}})
	}
	if err := c.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteRange(1, 5); err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	for i := uint64(6); i <= 10; i++ {
		if err := c.GetLog(i, &l); err != nil || l.Index != i {
			t.Fatalf("GetLog(%d) after DeleteRange(1, 5): %v, index %d", i, err, l.Index)
		}
	}
	if n := inner.gets.Load(); n != 0 {
		t.Fatalf("%d reads reached the store for entries DeleteRange(1, 5) left alone, want 0 (served from the cache)", n)
	}
	if err := c.GetLog(3, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog(3) after DeleteRange(1, 5): %v, want ErrLogNotFound", err)
	}
}
