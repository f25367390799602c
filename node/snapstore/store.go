package snapstore

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/vfs"
)

// Options configures a Store; zero fields take defaults.
type Options struct {
	FS     vfs.FS           // default vfs.OS(); must support hard links
	Logger hclog.Logger     // default: discard
	Now    func() time.Time // for snapshot IDs; default time.Now
}

// Stats counts what the store did since it was opened.
type Stats struct {
	LinkedCreated   uint64 // local snapshots finished by reference (links)
	StreamsReceived uint64 // stream snapshots finished (from a leader, or a non-linking Persist)
	Opened          uint64 // Open calls that returned a reader
	Deleted         uint64 // snapshots removed by retention
	CopiedSegments  uint64 // segments copied because a hard link was impossible
}

// Store is a raft.SnapshotStore keeping snapshots under one directory.
// It is safe for concurrent use.
type Store struct {
	dir    string
	retain int
	fs     vfs.FS
	log    hclog.Logger
	now    func() time.Time

	mu      sync.Mutex     // orders ID choice, Open's registration and retention
	readers map[string]int // open readers per snapshot ID

	linked, streams, opened, deleted, copied atomic.Uint64
}

var _ raft.SnapshotStore = (*Store)(nil)

// New opens (creating it if needed) the snapshot store in dir, keeping the
// newest retain snapshots, and removes what an interrupted write or delete
// left behind.
func New(dir string, retain int, opts Options) (*Store, error) {
	if retain < 1 {
		return nil, fmt.Errorf("snapstore: retain %d < 1", retain)
	}
	if opts.FS == nil {
		opts.FS = vfs.OS()
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Store{dir: dir, retain: retain, fs: opts.FS, log: opts.Logger, now: opts.Now, readers: map[string]int{}}
	if err := s.fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("snapstore: %w", err)
	}
	if err := s.removeLeftovers(); err != nil {
		return nil, err
	}
	return s, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Stats returns the counters.
func (s *Store) Stats() Stats {
	return Stats{LinkedCreated: s.linked.Load(), StreamsReceived: s.streams.Load(), Opened: s.opened.Load(),
		Deleted: s.deleted.Load(), CopiedSegments: s.copied.Load()}
}

func (s *Store) removeLeftovers() error {
	names, err := s.fs.List(s.dir)
	if err != nil {
		return fmt.Errorf("snapstore: %w", err)
	}
	for _, name := range names {
		if !strings.HasSuffix(name, tmpSuffix) && !strings.HasSuffix(name, delSuffix) {
			continue
		}
		s.log.Warn("removing an unfinished snapshot directory", "name", name)
		if err := s.fs.RemoveAll(filepath.Join(s.dir, name)); err != nil {
			return fmt.Errorf("snapstore: remove %s: %w", name, err)
		}
	}
	return nil
}

// Create starts a snapshot; raft calls it for a local snapshot (Persist) and
// for one a leader sends (InstallSnapshot, then Write of the stream).
func (s *Store) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, _ raft.Transport) (raft.SnapshotSink, error) {
	if version < raft.SnapshotVersionMin || version > raft.SnapshotVersionMax {
		return nil, fmt.Errorf("%w: %d", ErrVersion, version)
	}
	id, err := s.newID(term, index)
	if err != nil {
		return nil, err
	}
	tmp := filepath.Join(s.dir, id+tmpSuffix)
	if err := s.fs.MkdirAll(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("snapstore: %w", err)
	}
	meta := raft.SnapshotMeta{Version: version, ID: id, Index: index, Term: term,
		Configuration: configuration, ConfigurationIndex: configurationIndex}
	s.log.Debug("creating snapshot", "id", id)
	return &sink{s: s, meta: meta, tmp: tmp}, nil
}

// newID names a snapshot term-index-unixms, unique in the directory.
func (s *Store) newID(term, index uint64) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ms := s.now().UnixMilli()
	for range 1000 {
		id := fmt.Sprintf("%d-%d-%d", term, index, ms)
		if !s.exists(id) && !s.exists(id+tmpSuffix) && !s.exists(id+delSuffix) {
			return id, nil
		}
		ms++
	}
	return "", fmt.Errorf("snapstore: no free snapshot name for term %d index %d", term, index)
}

func (s *Store) exists(name string) bool {
	_, err := s.fs.Stat(filepath.Join(s.dir, name))
	return err == nil
}

// List returns the valid snapshots, newest first.
func (s *Store) List() ([]*raft.SnapshotMeta, error) {
	bodies, err := s.finished()
	if err != nil {
		return nil, err
	}
	out := make([]*raft.SnapshotMeta, len(bodies))
	for i := range bodies {
		m := bodies[i].Meta
		out[i] = &m
	}
	return out, nil
}

// finished reads every finished snapshot's meta, newest first; directories
// with a bad meta.json are logged and left out.
func (s *Store) finished() ([]metaBody, error) {
	names, err := s.fs.List(s.dir)
	if err != nil {
		return nil, fmt.Errorf("snapstore: %w", err)
	}
	var out []metaBody
	for _, name := range names {
		if !validID(name) {
			continue
		}
		b, err := readMeta(s.fs, filepath.Join(s.dir, name))
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) || s.exists(name) {
				s.log.Warn("ignoring snapshot with bad metadata", "id", name, "error", err)
			}
			continue
		}
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return newer(out[i].Meta, out[j].Meta) })
	return out, nil
}

func newer(a, b raft.SnapshotMeta) bool {
	if a.Term != b.Term {
		return a.Term > b.Term
	}
	if a.Index != b.Index {
		return a.Index > b.Index
	}
	return idTime(a.ID) > idTime(b.ID)
}

// idTime is the unixms part of an ID (IDs of equal term and index compare
// by it, not as strings).
func idTime(id string) int64 {
	ms, _ := strconv.ParseInt(id[strings.LastIndexByte(id, '-')+1:], 10, 64)
	return ms
}

// validID accepts term-index-unixms (three decimal numbers).
func validID(id string) bool {
	parts := strings.Split(id, "-")
	if len(parts) != 3 {
		return false
	}
	for _, p := range parts {
		if _, err := strconv.ParseUint(p, 10, 64); err != nil {
			return false
		}
	}
	return true
}

// reap deletes finished snapshots beyond the newest retain that nobody is
// reading: rename to .del (atomic), sync the directory, then remove.
func (s *Store) reap() error {
	s.mu.Lock()
	bodies, err := s.finished()
	var doomed []string
	if err == nil && len(bodies) > s.retain {
		for _, b := range bodies[s.retain:] {
			if s.readers[b.Meta.ID] > 0 {
				continue // deleted when its last reader closes
			}
			del := filepath.Join(s.dir, b.Meta.ID+delSuffix)
			if err = s.fs.Rename(filepath.Join(s.dir, b.Meta.ID), del); err != nil {
				break
			}
			doomed = append(doomed, del)
		}
		if len(doomed) > 0 {
			err = errors.Join(err, s.fs.SyncDir(s.dir))
		}
	}
	s.mu.Unlock()
	for _, d := range doomed {
		err = errors.Join(err, s.fs.RemoveAll(d))
		s.deleted.Add(1)
		s.log.Debug("deleted old snapshot", "id", strings.TrimSuffix(filepath.Base(d), delSuffix))
	}
	if err != nil {
		return fmt.Errorf("snapstore: retention: %w", err)
	}
	return nil
}

// register marks id as being read; it fails if the snapshot is gone.
func (s *Store) register(id string) (metaBody, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, err := readMeta(s.fs, filepath.Join(s.dir, id))
	if errors.Is(err, fs.ErrNotExist) {
		return b, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return b, fmt.Errorf("snapstore: snapshot %s: %w", id, err)
	}
	s.readers[id]++
	return b, nil
}

// release ends a read registered by register and runs the retention that
// may have waited for it.
func (s *Store) release(id string) {
	s.mu.Lock()
	if s.readers[id]--; s.readers[id] <= 0 {
		delete(s.readers, id)
	}
	s.mu.Unlock()
	if err := s.reap(); err != nil {
		s.log.Warn("snapshot retention after a read failed", "error", err)
	}
}
