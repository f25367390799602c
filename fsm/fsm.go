package fsm

import (
	"errors"
	"fmt"
	"io"
	"maps"
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
	// Delivered is how many scheduled messages a DeliverDue stored.
	Delivered int
	Err       error // a rejected command, a skipped entry or ErrFatal
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
	// OnSpaceWait, if set, is called from the FSM goroutine before each try
	// of an entry a full disk refused (a leader hands leadership over); it
	// must not block.
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
	f.mergeStoreMembers(st)
}

// mergeStoreMembers overlays the member addresses st holds (every
// SetMemberMeta it applied) on the map: the store's are the newest a
// node knows at start, before Raft gives it any entry.
func (f *FSM) mergeStoreMembers(st *store.Store) {
	f.mu.Lock()
	defer f.mu.Unlock()
	maps.Copy(f.members, st.Members())
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
	prev, _ := f.Store().Applied()
	if l.Index <= prev {
		f.skipped.Add(1)
		f.replayMember(l.Data)
		return &ApplyResponse{Err: fmt.Errorf("entry %d: %w", l.Index, store.ErrAlreadyApplied)}
	}
	start := time.Now()
	cmd, decodeErr := DecodeCommand(l.Data)
	if decodeErr != nil {
		f.log.Warn("rejecting malformed entry", "index", l.Index, "error", decodeErr)
	}
	try := func(st *store.Store) (*ApplyResponse, error) { return f.applyTo(st, l, &cmd, decodeErr) }
	resp, err := try(f.Store())
	if WaitsForSpace(err) {
		resp, err = f.waitForSpace(l, prev, try, resp, err)
	}
	if err != nil {
		return &ApplyResponse{Err: f.stop(fmt.Errorf("%w: entry %d: %w", ErrFatal, l.Index, err))}
	}
	resp.ApplyDuration = time.Since(start)
	return resp
}

// applyTo applies one entry to st: its response (a refused command's too:
// it is recorded with MarkApplied so the applied index moves as on every
// replica), or the store's local error.
func (f *FSM) applyTo(st *store.Store, l *raft.Log, cmd *Command, decodeErr error) (*ApplyResponse, error) {
	h := store.EntryHeader{RaftIndex: l.Index, Term: l.Term, StoreTimestamp: f.lastTS}
	resp, err := (*ApplyResponse)(nil), decodeErr
	if err == nil {
		resp, err = f.execute(st, &h, cmd)
	}
	switch {
	case err == nil:
		f.applied.Add(1)
		return resp, nil
	case !IsDeterministic(err):
		return resp, err // the results of an entry written whose dispatch failed
	}
	if idx, _ := st.Applied(); idx < h.RaftIndex {
		if merr := st.MarkApplied(h); merr != nil {
			return nil, merr
		}
	}
	f.rejected.Add(1)
	return &ApplyResponse{Err: err}, nil
}

// WaitsForSpace reports whether a local store error is waited out: a
// write the file system refused for lack of space. A failed sync is not,
// even for ENOSPC: the kernel may have dropped the pages it covered while
// the page cache still shows them, which no reopen can tell.
func WaitsForSpace(err error) bool {
	return err != nil && vfs.IsNoSpace(err) && !errors.Is(err, store.ErrSyncFailed) && !vfs.IsSyncFailure(err)
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
	case CmdSetDedup:
		return &ApplyResponse{}, st.SetDedupConfig(*h, cmd.Dedup)
	case CmdSetMemberMeta:
		if err := st.SetMember(*h, cmd.MemberID, cmd.MemberAPIAddr); err != nil {
			return nil, err
		}
		f.setMember(cmd.MemberID, cmd.MemberAPIAddr)
		return &ApplyResponse{}, nil
	case CmdDeliverDue:
		h.StoreTimestamp = max(cmd.LeaderTimestamp, f.lastTS)
		h.StoreHost = cmd.LeaderHost
		n, err := st.DeliverDue(*h)
		if err == nil {
			f.lastTS = h.StoreTimestamp
		}
		return &ApplyResponse{Delivered: n}, err
	}
	return nil, fmt.Errorf("%w: %s", ErrUnknownCommand, cmd.Type)
}

// waitForSpace retries an entry the store could not apply because its disk
// is full. The store failed closed, possibly with part of the entry
// written, so each try reopens it first (recovery from disk cuts the
// partial entry), runs a retention pass (the store's own never gets its
// turn between two tries) and applies the entry again; pauses double from
// Config.SpaceRetry. Retention, an operator or a topic delete replicated
// before the entry frees space; until then this node applies nothing and
// its Raft log falls behind, which the leader tolerates. prev is the
// store's applied index before the first try: a reopened store below it
// lost applied entries (Raft will not deliver them again), which is
// fatal. first is the first try's response: when recovery finds the entry
// applied before the disk filled (a message batch written to the commitlog
// whose dispatch failed), its results are those of the try that wrote it. It returns the last error
// once Done is closed, or the entry's response.
func (f *FSM) waitForSpace(l *raft.Log, prev uint64, try func(*store.Store) (*ApplyResponse, error), first *ApplyResponse, cause error) (*ApplyResponse, error) {
	f.spaceWaits.Add(1)
	f.waitingForSpace.Store(true)
	defer f.waitingForSpace.Store(false)
	f.log.Error("disk full: applying paused, retrying until there is space", "index", l.Index, "error", cause)
	pause := f.cfg.SpaceRetry
	if pause <= 0 {
		pause = DefaultSpaceRetry
	}
	maxPause := 32 * pause
	for n := 1; ; n++ {
		if f.cfg.OnSpaceWait != nil {
			f.cfg.OnSpaceWait() // each time: this node may have been elected meanwhile
		}
		t := time.NewTimer(pause)
		select {
		case <-f.cfg.Done:
			t.Stop()
			return nil, cause
		case <-t.C:
		}
		pause = min(2*pause, maxPause)
		resp, err := f.retry(l, prev, try, first)
		if err == nil {
			f.log.Info("disk has space again: applying resumed", "index", l.Index, "tries", n)
			return resp, nil
		}
		if !WaitsForSpace(err) {
			return nil, err
		}
		if resp != nil && len(resp.Results) > 0 {
			first = resp // this try wrote the entry; its dispatch was refused
		}
		cause = err
		if n == 1 || n%50 == 0 {
			f.log.Warn("disk still full", "index", l.Index, "tries", n, "error", err)
		}
	}
}

// retry is one try of waitForSpace: reopen, retention, the entry.
func (f *FSM) retry(l *raft.Log, prev uint64, try func(*store.Store) (*ApplyResponse, error), first *ApplyResponse) (*ApplyResponse, error) {
	st, err := f.reopen()
	if err != nil {
		return nil, err
	}
	switch idx, _ := st.Applied(); {
	case idx >= l.Index && first != nil && len(first.Results) > 0:
		f.applied.Add(1)
		return first, nil
	case idx >= l.Index:
		return &ApplyResponse{Err: fmt.Errorf("entry %d: stored before the disk filled, results unknown: %w", l.Index, store.ErrAlreadyApplied)}, nil
	case idx < prev:
		return nil, fmt.Errorf("the reopened store applied up to index %d, below the %d it had applied before the disk filled", idx, prev)
	}
	if err := st.RunRetention(); err != nil {
		return nil, err
	}
	return try(st)
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

// replayMember keeps the member map complete when Raft gives the FSM
// entries the store already holds (a log older than the store's member
// map, whose SetMemberMeta entries were recorded as no-ops): a skipped
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
	f.mergeStoreMembers(st)
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
