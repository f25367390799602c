package node

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	"go.etcd.io/bbolt"
)

// Raft log store kinds (RaftConfig.LogStore).
const (
	// LogStoreBolt is raft-boltdb/v2 with NoFreelistSync and the hashmap
	// freelist: one bolt transaction and fsync per StoreLogs. The default.
	LogStoreBolt = "boltdb"
	// LogStoreWAL is hashicorp/raft-wal: segment files, one fsync per
	// StoreLogs, whole files deleted on compaction. Experimental here.
	LogStoreWAL = "wal"
)

// RaftStore is a Raft log store that is also the stable store.
type RaftStore interface {
	raft.LogStore
	raft.StableStore
	io.Closer
}

// OpenRaftStore opens the Raft log + stable store of kind ("" is
// LogStoreBolt) under dir (raft.db for bolt, wal/ for raft-wal). The bench's
// ceiling opens its store here too, so both measure the same storage.
func OpenRaftStore(kind, dir string, logger hclog.Logger) (RaftStore, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	switch kind {
	case "", LogStoreBolt:
		s, err := raftboltdb.New(raftboltdb.Options{
			Path:        filepath.Join(dir, "raft.db"),
			BoltOptions: &bbolt.Options{Timeout: time.Second, NoFreelistSync: true, FreelistType: bbolt.FreelistMapType},
		})
		if err != nil {
			return nil, fmt.Errorf("node: open raft log %s: %w", dir, err)
		}
		return s, nil
	case LogStoreWAL:
		wdir := filepath.Join(dir, "wal")
		if err := os.MkdirAll(wdir, 0o755); err != nil {
			return nil, fmt.Errorf("node: %w", err)
		}
		if logger == nil {
			logger = hclog.NewNullLogger()
		}
		w, err := wal.Open(wdir, wal.WithLogger(logger))
		if err != nil {
			return nil, fmt.Errorf("node: open raft wal %s: %w", wdir, err)
		}
		return w, nil
	}
	return nil, fmt.Errorf("%w: raft log_store %q is neither %q nor %q", ErrConfig, kind, LogStoreBolt, LogStoreWAL)
}
