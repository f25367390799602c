package fsm

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/vfs"
)

// ErrFatal is returned (wrapped) once the store failed in a way that is not a
// deterministic consequence of the entry (an I/O error, a closed store): the
// FSM stops applying, so the node's state never diverges, and the entries it
// refused are replayed from the Raft log after a restart.
var ErrFatal = errors.New("fsm: store failed, applying stopped")

// ApplyResponse is what the FSM returns for every entry it is given.
type ApplyResponse struct {
	Results []store.PutResult // one per message of a MessageBatch
	Err     error             // a rejected command, a skipped entry or ErrFatal
	// ApplyDuration is the time the FSM spent decoding and applying the
	// entry (for the leader's latency breakdown).
	ApplyDuration time.Duration
}

// Stats counts entries by outcome since the FSM was created.
type Stats struct {
	Applied  uint64 // commands applied to the store
	Skipped  uint64 // entries at or below the store's applied index (replay)
	Rejected uint64 // malformed or deterministically refused commands
	Other    uint64 // configuration entries
	// SpaceWaits counts entries whose apply waited for disk space;
	// WaitingForSpace says one is waiting now.
	SpaceWaits      uint64
	WaitingForSpace bool
}

// Config wires an FSM to its store.
type Config struct {
	FS     vfs.FS
	Store  store.Config // used to reopen the store after Restore
	Logger hclog.Logger
	// OnFatal is called once, from the FSM goroutine, when ErrFatal first
	// happens (the node shuts down).
	OnFatal func(error)
	// OnRestore is called after Restore reopened the store.
	OnRestore func(*store.Store)
	// SnapshotBytes, if positive, makes SnapshotDue fire once the command
	// bytes applied since the last snapshot reach it.
	SnapshotBytes int64
	// Done, closed when the node shuts down, ends a wait for disk space
	// (the entry then fails with ErrFatal and is replayed after a restart).
	Done <-chan struct{}
	// SpaceRetry is the first pause of a wait for disk space; it doubles up
	// to 32 times that. Zero means DefaultSpaceRetry.
	SpaceRetry time.Duration
	// OnSpaceWait, if set, is called from the FSM goroutine when a wait for
	// disk space begins (a leader hands leadership over).
	OnSpaceWait func()
}

// DefaultSpaceRetry is the first pause between two tries of an entry the
// store could not apply for lack of disk space.
const DefaultSpaceRetry = 100 * time.Millisecond

// FSM is the raft.BatchingFSM over a store.Store.
type FSM struct {
	cfg Config
	log hclog.Logger

	st atomic.Pointer[store.Store] // swapped by Restore

	lastTS int64 // FSM goroutine only: the last store timestamp used
	fatal  error // FSM goroutine only

	applied, skipped, rejected, other atomic.Uint64
	waitingForSpace                   atomic.Bool
	spaceWaits                        atomic.Uint64

	// Raft log bytes (command entries) handed to the FSM, in total and as
	// of the last snapshot capture, and entries likewise: the node's
	// snapshot-by-size trigger and trailing-log sizing read them.
	logBytes, logBytesAtSnapshot     atomic.Int64
	logEntries, logEntriesAtSnapshot atomic.Int64
	snapshotDue                      chan struct{} // buffered 1

	mu      sync.Mutex
	members map[string]string
}

var _ raft.BatchingFSM = (*FSM)(nil)

// New returns an FSM applying to st (already opened and recovered).
func New(st *store.Store, cfg Config) *FSM {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	f := &FSM{cfg: cfg, log: cfg.Logger, members: make(map[string]string), snapshotDue: make(chan struct{}, 1)}
	f.setStore(st)
	return f
}

func (f *FSM) setStore(st *store.Store) {
	f.st.Store(st)
	f.lastTS = st.LastStoreTimestamp() // recovered: timestamps stay monotonic across restarts
}

// Store returns the current store (it changes when a snapshot is restored).
func (f *FSM) Store() *store.Store { return f.st.Load() }

// Stats returns the entry counters.
func (f *FSM) Stats() Stats {
	return Stats{Applied: f.applied.Load(), Skipped: f.skipped.Load(),
		Rejected: f.rejected.Load(), Other: f.other.Load(),
		SpaceWaits: f.spaceWaits.Load(), WaitingForSpace: f.waitingForSpace.Load()}
}

// Members returns a copy of the server id → API address map.
func (f *FSM) Members() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := make(map[string]string, len(f.members))
	for k, v := range f.members {
		m[k] = v
	}
	return m
}

// SeedMembers merges m into the member map (used at start from the newest
// local snapshot, whose entries Raft does not replay).
func (f *FSM) SeedMembers(m map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, v := range m {
		if _, ok := f.members[k]; !ok {
			f.members[k] = v
		}
	}
}

func (f *FSM) setMember(id, addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.members[id] = addr
}

// Apply applies one entry.
func (f *FSM) Apply(l *raft.Log) interface{} { return f.applyOne(l) }

// ApplyBatch applies entries in order, one response per entry.
func (f *FSM) ApplyBatch(logs []*raft.Log) []interface{} {
	out := make([]interface{}, len(logs))
	for i, l := range logs {
		out[i] = f.applyOne(l)
	}
	return out
}

func (f *FSM) applyOne(l *raft.Log) interface{} {
	if l.Type != raft.LogCommand {
		f.other.Add(1)
		return nil
	}
	f.countLogBytes(len(l.Data))
	if f.fatal != nil {
		return &ApplyResponse{Err: f.fatal}
	}
	st := f.Store()
	if idx, _ := st.Applied(); l.Index <= idx {
		f.skipped.Add(1)
		f.replayMember(l.Data)
		return &ApplyResponse{Err: fmt.Errorf("entry %d: %w", l.Index, store.ErrAlreadyApplied)}
	}
	start := time.Now()
	h := store.EntryHeader{RaftIndex: l.Index, Term: l.Term, StoreTimestamp: f.lastTS}
	cmd, err := DecodeCommand(l.Data)
	if err != nil {
		f.log.Warn("rejecting malformed entry", "index", l.Index, "error", err)
		return f.reject(st, h, err)
	}
	resp, err := f.execute(st, &h, &cmd)
	if err != nil && vfs.IsNoSpace(err) {
		if resp, err = f.waitForSpace(l, &cmd, err); resp != nil && resp.Err != nil {
			return resp // applied before the disk filled: results unknown
		}
		st = f.Store()
	}
	if err != nil {
		return f.failed(st, h, err)
	}
	f.applied.Add(1)
	resp.ApplyDuration = time.Since(start)
	return resp
}

// execute runs one decoded command against the store.
func (f *FSM) execute(st *store.Store, h *store.EntryHeader, cmd *Command) (*ApplyResponse, error) {
	switch cmd.Type {
	case CmdMessageBatch:
		h.StoreTimestamp = max(cmd.LeaderTimestamp, f.lastTS)
		h.StoreHost = cmd.LeaderHost
		res, err := st.AppendMessages(*h, cmd.Messages, make([]store.PutResult, 0, len(cmd.Messages)))
		if err == nil {
			f.lastTS = h.StoreTimestamp
		}
		return &ApplyResponse{Results: res}, err
	case CmdCommitOffsets:
		return &ApplyResponse{}, st.CommitOffsets(*h, cmd.Commits)
	case CmdCreateTopic:
		return &ApplyResponse{}, st.CreateTopic(*h, cmd.Topic)
	case CmdUpdateTopic:
		return &ApplyResponse{}, st.UpdateTopic(*h, cmd.Topic)
	case CmdDeleteTopic:
		return &ApplyResponse{}, st.DeleteTopic(*h, cmd.TopicName)
	case CmdSetMemberMeta:
		f.setMember(cmd.MemberID, cmd.MemberAPIAddr)
		return &ApplyResponse{}, st.MarkApplied(*h)
	}
	return nil, fmt.Errorf("%w: %s", ErrUnknownCommand, cmd.Type)
}

// waitForSpace retries an entry the store could not apply because its disk
// is full. The store failed closed, possibly with part of the entry
// written, so each try reopens it first (recovery from disk cuts the
// partial entry) and applies the entry again; pauses double from
// Config.SpaceRetry. Retention, an operator or a topic delete replicated
// before the entry frees space; until then this node applies nothing and
// its Raft log falls behind, which the leader tolerates. It returns the
// last error once Done is closed, or the entry's response: a response
// with Err set if recovery found the entry already applied (its results
// are not known here).
func (f *FSM) waitForSpace(l *raft.Log, cmd *Command, cause error) (*ApplyResponse, error) {
	f.spaceWaits.Add(1)
	f.waitingForSpace.Store(true)
	defer f.waitingForSpace.Store(false)
	f.log.Error("disk full: applying paused, retrying until there is space", "index", l.Index, "error", cause)
	if f.cfg.OnSpaceWait != nil {
		f.cfg.OnSpaceWait()
	}
	pause := f.cfg.SpaceRetry
	if pause <= 0 {
		pause = DefaultSpaceRetry
	}
	maxPause := 32 * pause
	for try := 1; ; try++ {
		t := time.NewTimer(pause)
		select {
		case <-f.cfg.Done:
			t.Stop()
			return nil, cause
		case <-t.C:
		}
		pause = min(2*pause, maxPause)
		st, err := f.reopen()
		if err == nil {
			if idx, _ := st.Applied(); idx >= l.Index {
				f.log.Info("disk has space again: the entry was stored before it filled", "index", l.Index, "tries", try)
				return &ApplyResponse{Err: fmt.Errorf("entry %d: stored before the disk filled, results unknown: %w", l.Index, store.ErrAlreadyApplied)}, nil
			}
			h := store.EntryHeader{RaftIndex: l.Index, Term: l.Term, StoreTimestamp: f.lastTS}
			var resp *ApplyResponse
			if resp, err = f.execute(st, &h, cmd); err == nil {
				f.log.Info("disk has space again: applying resumed", "index", l.Index, "tries", try)
				return resp, nil
			}
		}
		if !vfs.IsNoSpace(err) {
			return nil, err
		}
		cause = err
		if try == 1 || try%50 == 0 {
			f.log.Warn("disk still full", "index", l.Index, "tries", try, "error", err)
		}
	}
}

// reopen closes the current store (failed closed: it keeps its abort file)
// and opens it again, recovering from what is on disk.
func (f *FSM) reopen() (*store.Store, error) {
	if err := f.Store().Close(); err != nil && !errors.Is(err, store.ErrClosed) {
		f.log.Debug("closing the failed store", "error", err)
	}
	st, err := store.Open(f.cfg.FS, f.cfg.Store)
	if err != nil {
		return nil, err
	}
	f.setStore(st)
	return st, nil
}

// replayMember keeps the member map complete across restarts: a skipped
// SetMemberMeta entry still updates the in-memory map.
func (f *FSM) replayMember(data []byte) {
	if len(data) < 2 || CommandType(data[1]) != CmdSetMemberMeta {
		return
	}
	if cmd, err := DecodeCommand(data); err == nil {
		f.setMember(cmd.MemberID, cmd.MemberAPIAddr)
	}
}

// IsDeterministic reports whether err is a store error that every replica
// produces for the same entry (so rejecting the entry keeps them identical).
func IsDeterministic(err error) bool {
	return store.Deterministic(err) || errors.Is(err, ErrMalformed) || errors.Is(err, ErrUnknownCommand)
}

func (f *FSM) failed(st *store.Store, h store.EntryHeader, err error) interface{} {
	if IsDeterministic(err) {
		return f.reject(st, h, err)
	}
	return &ApplyResponse{Err: f.stop(fmt.Errorf("%w: entry %d: %w", ErrFatal, h.RaftIndex, err))}
}

// stop records fatal (which wraps ErrFatal): no further entry is applied,
// and OnFatal tells the node to shut down.
func (f *FSM) stop(fatal error) error {
	f.fatal = fatal
	f.log.Error("store failed; no further entries are applied", "error", fatal)
	if f.cfg.OnFatal != nil {
		f.cfg.OnFatal(fatal)
	}
	return fatal
}

// reject records a refused command so appliedIndex still moves forward.
func (f *FSM) reject(st *store.Store, h store.EntryHeader, err error) interface{} {
	f.rejected.Add(1)
	if idx, _ := st.Applied(); idx < h.RaftIndex {
		if merr := st.MarkApplied(h); merr != nil {
			return f.failed(st, h, merr)
		}
	}
	return &ApplyResponse{Err: err}
}

// countLogBytes adds one command entry of n bytes and signals SnapshotDue
// when the bytes since the last snapshot reach Config.SnapshotBytes.
func (f *FSM) countLogBytes(n int) {
	total := f.logBytes.Add(int64(n))
	f.logEntries.Add(1)
	if f.cfg.SnapshotBytes > 0 && total-f.logBytesAtSnapshot.Load() >= f.cfg.SnapshotBytes {
		select {
		case f.snapshotDue <- struct{}{}:
		default:
		}
	}
}

// SnapshotDue receives a value when the Raft log bytes applied since the
// last snapshot reached Config.SnapshotBytes (at most one is pending).
func (f *FSM) SnapshotDue() <-chan struct{} { return f.snapshotDue }

// LogSinceSnapshot is the command bytes and entries applied since the last
// snapshot was captured.
func (f *FSM) LogSinceSnapshot() (bytes, entries int64) {
	return f.logBytes.Load() - f.logBytesAtSnapshot.Load(), f.logEntries.Load() - f.logEntriesAtSnapshot.Load()
}

// Snapshot captures the store's point-in-time state; O(metadata).
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	if f.fatal != nil {
		return nil, f.fatal
	}
	// Raft calls Snapshot on the FSM goroutine: no entry is applied
	// between this count and the capture below.
	f.logBytesAtSnapshot.Store(f.logBytes.Load())
	f.logEntriesAtSnapshot.Store(f.logEntries.Load())
	st := f.Store()
	return &fsmSnapshot{fsm: f, st: st, snap: st.CaptureSnapshot(), members: f.Members()}, nil
}

// Restore replaces the store by the snapshot stream rc. A failed Restore
// is fatal (see restore): the FSM applies nothing more and OnFatal is
// called, so a node never runs on after one.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	start := time.Now()
	h, err := f.restore(rc)
	if err != nil {
		// Raft may already hold the snapshot (a follower stores what it
		// received before restoring it) while the store is the old one: a
		// node that went on applying would build on the wrong base. At the
		// next start the node restores the stored snapshot before Raft runs.
		return f.stop(fmt.Errorf("%w: restore snapshot: %w", ErrFatal, err))
	}
	f.fatal = nil
	f.logBytesAtSnapshot.Store(f.logBytes.Load())
	f.logEntriesAtSnapshot.Store(f.logEntries.Load())
	f.mu.Lock()
	f.members = h.Members
	f.mu.Unlock()
	st := f.Store()
	if f.cfg.OnRestore != nil {
		f.cfg.OnRestore(st)
	}
	f.log.Info("snapshot restored", "index", h.Store.AppliedIndex, "confirm_offset", h.Store.ConfirmOffset,
		"segments", len(h.Segments), "duration", time.Since(start))
	return nil
}

// restore installs the snapshot in rc and reopens the store: the new one,
// or the old one if the install failed.
func (f *FSM) restore(rc io.Reader) (SnapshotHeader, error) {
	h, err := ReadSnapshotHeader(rc)
	if err != nil {
		return h, err
	}
	if err := f.Store().Close(); err != nil && !errors.Is(err, store.ErrClosed) {
		return h, fmt.Errorf("close store: %w", err)
	}
	it := NewSegmentIterator(rc, h)
	err = store.InstallSnapshot(f.cfg.FS, f.cfg.Store, h.Store, it.Next)
	if err == nil {
		err = it.Finish()
	}
	st, oerr := store.Open(f.cfg.FS, f.cfg.Store)
	if oerr != nil {
		return h, errors.Join(err, fmt.Errorf("reopen store: %w", oerr))
	}
	f.setStore(st)
	return h, err
}

type fsmSnapshot struct {
	fsm     *FSM
	st      *store.Store
	snap    store.Snapshot
	members map[string]string
}

// Persist makes the store durable up to the snapshot (before Raft may
// compact, NATS #8425), then hands header and segment files to a sink that
// is a SegmentLinker, or streams header and segments into any other sink.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.persist(sink); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *fsmSnapshot) persist(w io.Writer) error {
	if err := s.st.FlushTo(s.snap.ConfirmOffset); err != nil {
		return fmt.Errorf("fsm: snapshot flush: %w", err)
	}
	// A restore on the FSM goroutine may have closed the captured store
	// since Snapshot: SegmentFiles then fails instead of listing nothing.
	files, err := s.st.SegmentFiles(s.snap.ConfirmOffset)
	if err != nil {
		return fmt.Errorf("fsm: snapshot segments: %w", err)
	}
	h := SnapshotHeader{Store: s.snap, Members: s.members, Segments: SegmentRefs(files, s.snap.ConfirmOffset)}
	if len(h.Segments) > 0 && h.Segments[0].Start > h.Store.MinOffset {
		// Retention deleted the oldest segment after the capture: the
		// snapshot starts where its first segment does.
		h.Store.MinOffset = h.Segments[0].Start
	}
	if err := validateHeader(h); err != nil {
		return fmt.Errorf("fsm: snapshot of the store's segments: %w", err)
	}
	if l, ok := w.(SegmentLinker); ok {
		return l.LinkSegments(h, files) // O(metadata): the sink keeps references
	}
	return WriteSnapshot(w, h, files, FileSegments(s.fsm.cfg.FS))
}

// Release does nothing: the capture holds no resources.
func (s *fsmSnapshot) Release() {}
