package node

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
	"go.etcd.io/bbolt"

	"github.com/raftmq/raftmq/vfs"
)

// Raft log store kinds (RaftConfig.LogStore).
const (
	// LogStoreWAL is hashicorp/raft-wal (built from third_party/raft-wal,
	// v0.4.0 with crash-recovery fixes): append-only segment files, one
	// fsync per StoreLogs, whole files deleted on compaction. It writes
	// about 1.05 bytes per log byte, raft-boltdb 1.7–5.5 (see
	// BenchmarkRaftLogStore and README "Raft log store").
	LogStoreWAL = "wal"
	// LogStoreBolt is raft-boltdb/v2 with NoFreelistSync and the hashmap
	// freelist: one bolt transaction (two fdatasyncs) per StoreLogs.
	LogStoreBolt = "boltdb"
	// LogStoreAuto, the default, opens the kind a data dir already holds
	// and starts a new log with raft-wal: a dir that an older raftmq wrote
	// with raft-boltdb (its default then) keeps raft-boltdb.
	LogStoreAuto = "auto"
)

// ResolveLogStore is the kind OpenRaftStore opens for kind in dir: kind
// itself, or for LogStoreAuto (and "") the kind dir holds, raft-wal if none.
func ResolveLogStore(kind, dir string) string {
	if kind != "" && kind != LogStoreAuto {
		return kind
	}
	if exists(filepath.Join(dir, "raft.db")) && !exists(filepath.Join(dir, "wal", metadb.FileName)) {
		return LogStoreBolt
	}
	return LogStoreWAL
}

// RaftStore is a Raft log store that is also the stable store.
type RaftStore interface {
	raft.LogStore
	raft.StableStore
	io.Closer
	// WrittenBytes is how many bytes the store has handed to write()/pwrite
	// on its log files since it was opened (raftmq_disk_write_bytes_total
	// {file="raftlog"}). raft-wal: every WriteAt on its segment files
	// (its small metadata bolt file, written on segment rotation and term
	// or vote changes, is not counted). raft-boltdb: every page its
	// transactions wrote (bbolt's PageAlloc) plus one meta page per write
	// transaction — bbolt writes exactly those.
	WrittenBytes() int64
}

// RaftStoreOptions tune OpenRaftStoreWith; the zero value is what
// OpenRaftStore uses. They exist so BenchmarkRaftLogStore can measure
// bbolt's knobs; a node always opens with the zero value.
type RaftStoreOptions struct {
	Logger hclog.Logger
	// Bolt overrides the bbolt options (nil: NoFreelistSync, hashmap
	// freelist, 1 s lock timeout).
	Bolt *bbolt.Options
	// WALSegmentSize overrides raft-wal's segment size (0: its 64 MiB).
	WALSegmentSize int
}

// OpenRaftStore opens the Raft log + stable store of kind (resolved by
// ResolveLogStore) under dir (raft.db for bolt, wal/ for raft-wal). The bench's
// ceiling opens its store here too, so both measure the same storage.
func OpenRaftStore(kind, dir string, logger hclog.Logger) (RaftStore, error) {
	return OpenRaftStoreWith(kind, dir, RaftStoreOptions{Logger: logger})
}

// DefaultBoltOptions are the bbolt options of the boltdb log store.
func DefaultBoltOptions() *bbolt.Options {
	return &bbolt.Options{Timeout: time.Second, NoFreelistSync: true, FreelistType: bbolt.FreelistMapType}
}

// ErrLogStoreMismatch: the Raft directory holds the log of the other store
// kind (a data dir written with raft-boltdb opened with the raft-wal
// default, or the reverse). Opening it would start an empty log and lose
// the node's term, vote and entries.
var ErrLogStoreMismatch = errors.New("node: raft log store kind does not match the data dir")

// OpenRaftStoreWith is OpenRaftStore with options.
func OpenRaftStoreWith(kind, dir string, o RaftStoreOptions) (RaftStore, error) {
	if err := vfs.OS().MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	kind = ResolveLogStore(kind, dir)
	if err := checkLogStoreKind(kind, dir); err != nil {
		return nil, err
	}
	switch kind {
	case LogStoreBolt:
		bo := o.Bolt
		if bo == nil {
			bo = DefaultBoltOptions()
		}
		s, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db"), BoltOptions: bo})
		if err != nil {
			return nil, fmt.Errorf("node: open raft log %s: %w", dir, err)
		}
		// bbolt fsyncs raft.db but not the directory entry it created.
		if err := vfs.OS().SyncDir(dir); err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("node: sync raft log dir %s: %w", dir, err)
		}
		page := bo.PageSize
		if page == 0 {
			page = os.Getpagesize()
		}
		b := &boltStore{BoltStore: s, page: int64(page)}
		b.base = b.pageAlloc()
		return b, nil
	case LogStoreWAL:
		wdir := filepath.Join(dir, "wal")
		if err := vfs.OS().MkdirAll(wdir, 0o755); err != nil {
			return nil, fmt.Errorf("node: %w", err)
		}
		logger := o.Logger
		if logger == nil {
			logger = hclog.NewNullLogger()
		}
		ws, err := openWALStore(wdir, o.WALSegmentSize, walfs.New(), logger)
		if err != nil {
			return nil, err // not a nil *walStore in a non-nil RaftStore
		}
		return ws, nil
	}
	return nil, fmt.Errorf("%w: raft log_store %q is neither %q nor %q", ErrConfig, kind, LogStoreWAL, LogStoreBolt)
}

// openWALStore opens the raft-wal log in wdir over the file system files
// (segments of size bytes; 0: raft-wal's default).
func openWALStore(wdir string, size int, files types.VFS, logger hclog.Logger) (*walStore, error) {
	// Our own MetaStore, closed by walStore.Close: raft-wal v0.4.0's
	// Close leaves its metadata bolt file open, flock held, so opening
	// the same dir again in this process (a node restarted in-process)
	// would wait forever in bbolt.Open.
	ws := &walStore{meta: &metadb.BoltMetaDB{}}
	ws.deleter = &lazyDeleteVFS{VFS: &countingVFS{VFS: files, n: &ws.written}, logger: logger}
	filer := segment.NewFiler(wdir, ws.deleter)
	if size <= 0 {
		size = wal.DefaultSegmentSize
	}
	w, err := wal.Open(wdir, wal.WithLogger(logger), wal.WithSegmentFiler(filer),
		wal.WithSegmentSize(size), wal.WithMetaStore(ws.meta))
	if err != nil {
		_ = ws.meta.Close()
		ws.deleter.Close()
		return nil, fmt.Errorf("node: open raft wal %s: %w", wdir, err)
	}
	ws.WAL = w
	if err := vfs.OS().SyncDir(wdir); err != nil { // the meta db and first segment
		_ = ws.Close()
		return nil, fmt.Errorf("node: sync raft wal dir %s: %w", wdir, err)
	}
	return ws, nil
}

// checkLogStoreKind refuses a dir that holds only the other kind's log.
func checkLogStoreKind(kind, dir string) error {
	hasBolt := exists(filepath.Join(dir, "raft.db"))
	hasWAL := exists(filepath.Join(dir, "wal", metadb.FileName))
	switch {
	case kind != LogStoreWAL && hasWAL && !hasBolt:
		return fmt.Errorf("%w: %s holds a raft-wal log (wal/); set [raft] log_store = %q", ErrLogStoreMismatch, dir, LogStoreWAL)
	case kind == LogStoreWAL && hasBolt && !hasWAL:
		return fmt.Errorf("%w: %s holds a raft-boltdb log (raft.db); set [raft] log_store = %q to keep using it", ErrLogStoreMismatch, dir, LogStoreBolt)
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// walStore is raft-wal with its segment writes counted. Embedding *wal.WAL
// keeps every method, IsMonotonic (raft.MonotonicLogStore) included.
type walStore struct {
	*wal.WAL
	meta    *metadb.BoltMetaDB
	deleter *lazyDeleteVFS // removes compacted segments off raft-wal's write lock
	written atomic.Int64
}

// GetLog is raft-wal's GetLog, except that an index below FirstIndex is
// raft.ErrLogNotFound. raft-wal v0.4.0 compacts by moving its first index
// and deleting whole segments only, and still returns entries that were
// "deleted" but sit in a kept segment. Raft then keeps replicating a
// follower that is behind the compaction point from those entries instead
// of sending it a snapshot; raft-boltdb and raft's contract say they are
// gone.
func (w *walStore) GetLog(index uint64, l *raft.Log) error {
	first, err := w.WAL.FirstIndex()
	if err != nil {
		return err
	}
	if index < first {
		return raft.ErrLogNotFound
	}
	return w.WAL.GetLog(index, l)
}

// GetLogType is raft-wal's GetLogType (the fork's: the entry's type without
// its data, for Raft's start-up scan for configuration entries), with
// GetLog's rule for an index below FirstIndex.
func (w *walStore) GetLogType(index uint64) (raft.LogType, error) {
	first, err := w.WAL.FirstIndex()
	if err != nil {
		return 0, err
	}
	if index < first {
		return 0, raft.ErrLogNotFound
	}
	return w.WAL.GetLogType(index)
}

// Close closes the WAL, then its metadata file, and waits for the removal
// of the segments compactions dropped.
func (w *walStore) Close() error {
	err := errors.Join(w.WAL.Close(), w.meta.Close())
	w.deleter.Close()
	return err
}

func (w *walStore) WrittenBytes() int64 { return w.written.Load() }

// countingVFS counts the bytes raft-wal writes to its segment files.
type countingVFS struct {
	types.VFS
	n *atomic.Int64
}

func (c *countingVFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	f, err := c.VFS.Create(dir, name, size)
	if err != nil {
		return nil, err
	}
	return &countingFile{WritableFile: f, n: c.n}, nil
}

func (c *countingVFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	f, err := c.VFS.OpenWriter(dir, name)
	if err != nil {
		return nil, err
	}
	return &countingFile{WritableFile: f, n: c.n}, nil
}

type countingFile struct {
	types.WritableFile
	n *atomic.Int64
}

func (c *countingFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := c.WritableFile.WriteAt(p, off)
	c.n.Add(int64(n))
	return n, err
}

// boltStore is raft-boltdb with its write transactions counted: every
// StoreLogs, DeleteRange and Set is one bolt Update, which writes its
// dirty pages (counted by bbolt as PageAlloc) and one meta page.
type boltStore struct {
	*raftboltdb.BoltStore
	page int64
	base int64 // PageAlloc at open
	txs  atomic.Int64
}

func (b *boltStore) WrittenBytes() int64 {
	return b.pageAlloc() - b.base + b.txs.Load()*b.page
}

func (b *boltStore) pageAlloc() int64 {
	st := b.Stats()
	return st.TxStats.GetPageAlloc()
}

func (b *boltStore) counted(err error) error {
	if err == nil {
		b.txs.Add(1)
	}
	return err
}

func (b *boltStore) StoreLog(l *raft.Log) error    { return b.counted(b.BoltStore.StoreLog(l)) }
func (b *boltStore) StoreLogs(l []*raft.Log) error { return b.counted(b.BoltStore.StoreLogs(l)) }
func (b *boltStore) DeleteRange(lo, hi uint64) error {
	return b.counted(b.BoltStore.DeleteRange(lo, hi))
}
func (b *boltStore) Set(k, v []byte) error { return b.counted(b.BoltStore.Set(k, v)) }
func (b *boltStore) SetUint64(k []byte, v uint64) error {
	return b.counted(b.BoltStore.SetUint64(k, v))
}

// raftLogCacheEntries is how many of the newest Raft entries CachedLogs
// keeps in memory: at most this many times group_commit.max_bytes (plus a
// message) of entries the process holds anyway while it replicates them.
const raftLogCacheEntries = 64

// CachedLogs is the log store Raft gets: st behind raft.LogCache. Without
// it the leader read every entry back from the log store to replicate it
// (and the one before it, for its term), and a follower read every entry
// back to apply it: in a profile of the leader under pipelined load, a
// quarter of its CPU went to raft-wal GetLog (pread, frame decode and the
// allocations). The node and the bench's ceiling both use it.
func CachedLogs(st raft.LogStore) raft.LogStore {
	c, err := raft.NewLogCache(raftLogCacheEntries, st)
	if err != nil { // only for a capacity below 1
		return st
	}
	return c
}
