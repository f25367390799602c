package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/consumequeue"
	"github.com/raftmq/raftmq/index"
	"github.com/raftmq/raftmq/meta"
	"github.com/raftmq/raftmq/mmap"
	"github.com/raftmq/raftmq/recovery"
	"github.com/raftmq/raftmq/vfs"
)

// segmentRange is a commitlog segment captured for a flush.
type segmentRange struct {
	file  mmap.File
	start int64
}

// Directory names inside Config.Dir.
const (
	commitLogDir    = recovery.CommitLogDir
	consumeQueueDir = recovery.ConsumeQueueDir
	indexDir        = recovery.IndexDir
)

// entryMark is the last applied entry: the store reflects every Raft entry up
// to and including RaftIndex, and its commitlog ends at End.
type entryMark struct {
	Offset         int64 // start of the entry (-1: none)
	End            int64
	RaftIndex      uint64
	Term           uint64
	StoreTimestamp int64
}

// Store is the single-node message store driven by the Raft FSM. One
// goroutine (the FSM) writes; any number read. It owns one background
// goroutine (flush and retention) that Close stops.
type Store struct {
	cfg    Config
	fs     vfs.FS
	logger hclog.Logger

	// writeMu serialises every mutation: appends, commands, flush
	// bookkeeping, retention deletes.
	writeMu sync.Mutex
	// segMu: readers of mapped commitlog bytes hold it shared; deleting or
	// unmapping segments holds it exclusively.
	segMu sync.RWMutex
	log   *commitlog.Log
	cqs   *consumequeue.Store
	units *unitTrust // set by Open: which units a tag filter may skip unread
	idx   *index.Service
	alloc *mmap.Allocator

	// mu guards meta and applied for readers.
	mu      sync.RWMutex
	meta    *meta.Meta
	applied entryMark

	notify  *notifier
	scratch appendScratch // AppendMessages' working memory (writeMu)

	flushMu     sync.Mutex // one flush at a time
	ckptWritten bool       // a checkpoint was written by this process (flushMu)
	// idxDurable is the index state of the last index flush and
	// idxFlushedAt its time (flushMu): a checkpoint written without an
	// index flush carries idxDurable.
	idxDurable       recovery.IndexState
	idxFlushedAt     time.Time
	flushedOffset    atomic.Int64 // commitlog durable up to here
	ckptOffset       atomic.Int64 // confirmOffset of the last checkpoint written
	closed           atomic.Bool
	failure          atomic.Pointer[error] // set once by failClosed
	rebuildMarked    atomic.Bool           // a read found derived data damaged: marker written
	counters         counters
	timerMu          sync.Mutex
	timerCh          chan struct{} // ScheduleChanged's; nil until asked for
	newDue           int64         // TakeNewDue's (timerMu)
	plan             recovery.Plan
	recoveryDuration time.Duration
	recoveryReplayed int                  // entries the last Open replayed (tail, lag repair, rebuild)
	recoveryRepaired int                  // of which replayed to repair lagging queues
	recovered        *recoveredCheckpoint // set by Open, taken by the service goroutine

	stop chan struct{}
	wg   sync.WaitGroup
}

type counters struct {
	messages, bytes, entries, flushes, segmentsDeleted atomic.Uint64
	corruptions                                        atomic.Uint64 // reads refused for damaged data
	dedupHits                                          atomic.Uint64 // duplicates of stored producer sequences
	delivered                                          atomic.Uint64 // scheduled messages delivered (DeliverDue)
	lastFlushNanos                                     atomic.Int64
	diskUsedPercent                                    atomic.Int32 // as of the last service tick
}

// Open recovers the store in cfg.Dir (creating it if needed) and starts its
// flush and clean service. Recovery always completes before Open returns.
func Open(fsys vfs.FS, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := prepareDir(fsys, cfg.Dir); err != nil {
		return nil, err
	}
	s := &Store{cfg: cfg, fs: fsys, logger: cfg.Logger.Named("store"), notify: newNotifier(), stop: make(chan struct{})}
	if err := s.open(); err != nil {
		s.closeFiles()
		return nil, err
	}
	s.units = newUnitTrust(s.cqs.Queues())
	if err := recovery.CreateAbort(fsys, cfg.Dir, os.Getpid()); err != nil {
		s.closeFiles()
		return nil, err
	}
	s.counters.diskUsedPercent.Store(int32(s.diskUsedPercent()))
	s.wg.Add(1)
	go func() {
		s.checkpointRecovered()
		s.serviceLoop()
	}()
	return s, nil
}

// recoveredCheckpoint is the checkpoint of the state recovery rebuilt, when
// writing it was left to the service goroutine (checkpointRecovered).
type recoveredCheckpoint struct {
	ckpt recovery.Checkpoint
	segs []segmentRange
}

// checkpointRecovered makes what recovery replayed durable and writes the
// checkpoint captured when recovery finished, first thing in the service
// goroutine, so that Open returns (and the store serves) without waiting
// for the disk to take the rebuilt consume queues and index. The content is
// exactly what a checkpoint at the end of Open would hold; only the time
// differs. Until it is written the previous checkpoint stays valid: a crash
// in between recovers again from it and finds the commitlog already cut
// (TruncateDirty is durable). If a flush has written a checkpoint since
// Open, that one is newer and this one is dropped.
func (s *Store) checkpointRecovered() {
	rc := s.recovered
	if rc == nil {
		return
	}
	s.recovered = nil
	started := time.Now()
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	if s.ckptWritten {
		return
	}
	err := s.flushCommitLog(rc.segs, rc.ckpt.ConfirmOffset)
	if err == nil {
		s.writeMu.Lock()
		err = s.cqs.Flush()
		if err == nil {
			err = s.idx.Flush()
		}
		s.writeMu.Unlock()
	}
	if err != nil {
		err = fmt.Errorf("%w: %w", ErrSyncFailed, err)
	} else {
		err = recovery.WriteCheckpoint(s.fs, s.cfg.Dir, &rc.ckpt)
	}
	if err != nil {
		_ = s.failClosed(fmt.Errorf("checkpoint after recovery: %w", err))
		return
	}
	s.ckptOffset.Store(rc.ckpt.ConfirmOffset)
	s.ckptWritten = true
	s.idxDurable, s.idxFlushedAt = rc.ckpt.Index, started
	s.counters.flushes.Add(1)
	s.counters.lastFlushNanos.Store(int64(time.Since(started)))
	s.logger.Debug("checkpoint after recovery", "took", time.Since(started))
}

// prepareDir creates dir and undoes a snapshot install that did not finish.
func prepareDir(fsys vfs.FS, dir string) error {
	if _, err := fsys.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if _, oldErr := fsys.Stat(dir + ".old"); oldErr == nil {
			if err := fsys.Rename(dir+".old", dir); err != nil {
				return err
			}
		}
	}
	if err := fsys.RemoveAll(dir + ".staging"); err != nil {
		return err
	}
	return fsys.MkdirAll(dir, 0o755)
}

func (s *Store) open() error {
	abort, err := recovery.AbortExists(s.fs, s.cfg.Dir)
	if err != nil {
		return err
	}
	ckpt, err := recovery.ReadCheckpoint(s.fs, s.cfg.Dir)
	var ckptPtr *recovery.Checkpoint
	switch {
	case err == nil:
		ckptPtr = &ckpt
	case errors.Is(err, recovery.ErrNoCheckpoint):
	default:
		return err
	}
	if err := s.openFiles(durableQueues(ckptPtr)); err != nil {
		return err
	}
	plan, err := recovery.Begin(s.log, ckptPtr, abort)
	if err != nil {
		return err
	}
	err = s.apply(&plan)
	s.plan = plan
	return err
}

// durableQueues is the consume queues' durable units by the checkpoint:
// its queue table counts the units of every queue it covers, synced before
// it was written. Without a checkpoint (or one whose meta does not decode:
// recovery reports that) there are none.
func durableQueues(ckpt *recovery.Checkpoint) (func(string, int32) int64, int64) {
	if ckpt == nil {
		return nil, 0
	}
	m, err := meta.Decode(ckpt.Meta)
	if err != nil {
		return nil, 0
	}
	return func(topic string, queueID int32) int64 {
		return m.Queues[meta.QueueKey{Topic: topic, Queue: queueID}]
	}, ckpt.ConfirmOffset
}

func (s *Store) openFiles(durable func(string, int32) int64, durableBelow int64) error {
	var err error
	if s.cfg.UseAllocator && s.cfg.PreallocateSegments > 0 {
		s.alloc = mmap.NewAllocator(s.fs, mmap.AllocatorOptions{PreTouch: s.cfg.PreTouch, Logger: s.logger.Named("allocator")})
	}
	s.log, err = commitlog.Open(s.fs, commitlog.Config{
		Dir: filepath.Join(s.cfg.Dir, commitLogDir), FileSize: s.cfg.CommitLogFileSize,
		Allocator: s.alloc, Preallocate: s.cfg.PreallocateSegments,
		PreTouch: s.cfg.PreTouch && s.cfg.PreallocateSegments > 0, // with none ahead, no roll waits for a pre-touch
		Logger:   s.logger.Named("commitlog"),
	})
	if err != nil {
		return err
	}
	s.cqs, err = consumequeue.Open(s.fs, consumequeue.Config{
		Dir: filepath.Join(s.cfg.Dir, consumeQueueDir), FileSize: s.cfg.ConsumeQueueFileSize, Logger: s.logger.Named("consumequeue"),
		Durable: durable, DurableBelow: durableBelow,
	})
	if err != nil {
		return err
	}
	s.idx, err = index.Open(s.fs, index.Config{
		Dir: filepath.Join(s.cfg.Dir, indexDir), MaxHashSlots: s.cfg.IndexMaxHashSlots, MaxIndexes: s.cfg.IndexMaxIndexes, Logger: s.logger.Named("index"),
		StoreTime: s.log.StoreTimestampAt,
	})
	return err
}

// apply carries out a recovery plan: cut consume queues, index and meta
// back to the checkpoint (p.ScanFrom), repair lagging queues, then verify
// the commitlog tail and replay it in one pipeline (p.ScanTail decides
// confirmOffset as it goes; everything it hands over lies below it), cut
// the commitlog at confirmOffset, checkpoint. When entries were replayed
// the checkpoint is captured here and written by the service goroutine as
// soon as Open returns (checkpointRecovered).
func (s *Store) apply(p *recovery.Plan) error {
	started, begin := time.Now(), p.Duration // Begin ran before apply
	phase := started
	took := func() time.Duration { d := time.Since(phase); phase = time.Now(); return d }
	rp := s.replay()
	rebuilt, err := s.recoverToCheckpoint(p, rp)
	if err != nil {
		return err
	}
	prepare := took()
	// Above it: verify the tail and replay it into meta, queues and index.
	err = rp.Tail(p)
	s.recoveryReplayed = rp.Replayed
	if err != nil {
		return err
	}
	replay := took()
	if err := s.log.TruncateDirty(p.ConfirmOffset); err != nil {
		return fmt.Errorf("store: truncate commitlog at %d: %w", p.ConfirmOffset, err)
	}
	// A consume-queue file that straddles the commitlog's minimum survives
	// retention; on open its first units point at deleted segments, so the
	// queues' minimums follow the commitlog's (RocketMQ's correctMinOffset).
	if logMin := s.log.MinOffset(); logMin > 0 {
		if err := s.cleanDerived(logMin); err != nil {
			return fmt.Errorf("store: correct queue minimums to %d: %w", logMin, err)
		}
	}
	s.applied = entryMark{Offset: p.Last.Offset, End: p.ConfirmOffset, RaftIndex: p.Last.RaftIndex, Term: p.Last.Term, StoreTimestamp: p.Last.StoreTimestamp}
	s.flushedOffset.Store(p.ScanFrom)
	s.ckptOffset.Store(p.Checkpoint.ConfirmOffset)
	truncate := took()
	s.recoveryDuration = time.Since(started) + begin
	s.logger.Info("recovered", "mode", p.Mode.String(), "confirmOffset", p.ConfirmOffset, "appliedIndex", p.Last.RaftIndex,
		"tail", p.Tail.String(), "entriesVerified", p.Entries, "MB/s", mbPerSec(p.Bytes, replay), "duration", s.recoveryDuration)
	s.logger.Debug("recovery phases", "prepare", prepare, "verifyAndReplay", replay, "truncate", truncate)
	if s.recoveryReplayed > 0 && (p.Bytes > inlineRecoveredTail || s.recoveryRepaired > 0) && !rebuilt {
		// Writing back what was replayed can take long (the repaired queues
		// of a whole commitlog, a tail with no checkpoint below it): the
		// service goroutine does it. A short tail and what was re-indexed
		// below the checkpoint are written back below, before Open returns:
		// their pages (at most inlineRecoveredTail, the index pages of at
		// most IndexFlushInterval's) take a fraction of a second, and a node killed
		// again before a checkpoint in the background replayed and
		// re-indexed the same entries at every start.
		ckpt, segs := s.captureCheckpoint()
		s.recovered = &recoveredCheckpoint{ckpt: ckpt, segs: segs}
		return nil
	}
	// Nothing replayed (the checkpoint is cheap) or a rebuild, whose marker
	// may only go once a checkpoint covers the rebuilt queues and index.
	if err := s.flush(); err != nil {
		return err
	}
	if rebuilt {
		return s.fs.Remove(filepath.Join(s.cfg.Dir, rebuildMarker))
	}
	return nil
}

// recoverToCheckpoint cuts consume queues, index and meta back to the
// checkpoint, then rebuilds below it what a snapshot install or damage left
// missing, against the checkpoint's queue table. rebuilt says a snapshot
// install's rebuild ran.
func (s *Store) recoverToCheckpoint(p *recovery.Plan, rp *recovery.Replay) (rebuilt bool, err error) {
	m, err := recovery.CutToCheckpoint(p, s.cqs, s.idx)
	if err != nil {
		return false, err
	}
	s.meta = m
	if rebuilt, err = s.rebuildIfMarked(rp, p.ScanFrom); err != nil {
		return rebuilt, err
	}
	if !rebuilt {
		if err := rp.Reindex(p); err != nil {
			return false, err
		}
	}
	before := rp.Replayed
	rebuilt, err = s.repairLagging(rp, rebuilt, p.ScanFrom)
	s.recoveryRepaired = rp.Replayed - before
	return rebuilt, err
}

// inlineRecoveredTail is the most tail (commitlog bytes above the
// checkpoint) whose replay Open writes back itself (see apply): what waits
// for a flush is at most about FlushBytes (64 MiB by default) or a
// FlushInterval's worth, whichever comes first; a longer tail is written
// back by the service goroutine.
const inlineRecoveredTail = 64 << 20

// repairLagging rebuilds the queues that hold fewer units than the queue
// table says. The rebuild marker goes first (synced with its directory):
// the repaired units are unsynced until the flush that ends Open, and a
// power loss before it can leave holes in older queue files that the next
// start would not see; with the marker, that start rebuilds every queue.
// It reports whether the marker is there to remove after that flush.
func (s *Store) repairLagging(rp *recovery.Replay, rebuilt bool, scanFrom int64) (bool, error) {
	lagging := rp.Lagging()
	if len(lagging) == 0 {
		return rebuilt, nil
	}
	if !rebuilt {
		if err := writeMarker(s.fs, s.cfg.Dir); err != nil {
			return false, fmt.Errorf("store: mark the repair of lagging queues: %w", err)
		}
		if err := s.fs.SyncDir(s.cfg.Dir); err != nil {
			return false, fmt.Errorf("store: mark the repair of lagging queues: %w", err)
		}
	}
	return true, rp.RepairLagging(lagging, scanFrom)
}

func mbPerSec(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds() / 1e6
}

// Close stops the services, flushes everything, writes the final checkpoint
// and removes the abort file: the next Open runs normal recovery.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return ErrClosed
	}
	close(s.stop)
	s.wg.Wait()
	s.notify.closeAll()
	err := s.flush()
	if err == nil {
		err = recovery.RemoveAbort(s.fs, s.cfg.Dir)
	}
	if cerr := s.closeFiles(); err == nil {
		err = cerr
	}
	return err
}

func (s *Store) closeFiles() error {
	var errs []error
	s.segMu.Lock()
	defer s.segMu.Unlock()
	if s.idx != nil {
		s.idx.Close()
	}
	if s.cqs != nil {
		s.cqs.Close()
	}
	if s.log != nil {
		errs = append(errs, s.log.Close())
	}
	if s.alloc != nil {
		errs = append(errs, s.alloc.Close())
	}
	return errors.Join(errs...)
}

// Applied is the Raft index and term of the last applied entry.
func (s *Store) Applied() (index, term uint64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.applied.RaftIndex, s.applied.Term
}

// LastStoreTimestamp is the store time of the last applied entry; the FSM
// keeps store timestamps monotonic from it.
func (s *Store) LastStoreTimestamp() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.applied.StoreTimestamp
}

// ConfirmOffset is the end of the last applied entry.
func (s *Store) ConfirmOffset() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.applied.End
}

// DiskUsedPercent is the used share of the file system holding the store
// (df's Use%), as of the last flush tick, at most FlushInterval old; 0 when
// the file system cannot tell (vfs.ErrNoSpaceInfo).
func (s *Store) DiskUsedPercent() int { return int(s.counters.diskUsedPercent.Load()) }

// ReadDiskUsedPercent is DiskUsedPercent read from the file system now
// (one statfs).
func (s *Store) ReadDiskUsedPercent() int { return s.diskUsedPercent() }

// RecoveryPlan is what the last Open decided (tests and diagnostics).
func (s *Store) RecoveryPlan() recovery.Plan { return s.plan }

// Stats is a point-in-time view for metrics.
func (s *Store) Stats() Stats {
	s.mu.RLock()
	applied := s.applied
	topics := len(s.meta.Topics)
	queues := len(s.meta.Queues)
	producers := s.meta.Producers.Len()
	pending := s.meta.Timer.Pending(s.meta.Queues)
	s.mu.RUnlock()
	return Stats{
		MinOffset: s.log.MinOffset(), MaxOffset: applied.End, ConfirmOffset: applied.End,
		FlushedOffset: s.flushedOffset.Load(), CheckpointOffset: s.ckptOffset.Load(), TouchedOffset: s.log.TouchedOffset(),
		AppliedIndex: applied.RaftIndex, AppliedTerm: applied.Term,
		Messages: s.counters.messages.Load(), Bytes: s.counters.bytes.Load(), Entries: s.counters.entries.Load(),
		Flushes: s.counters.flushes.Load(), LastFlushDuration: time.Duration(s.counters.lastFlushNanos.Load()),
		RecoveryDuration: s.recoveryDuration, RecoveryMode: s.plan.Mode.String(),
		Topics: topics, Queues: queues, SegmentsDeleted: s.counters.segmentsDeleted.Load(),
		Corruptions: s.counters.corruptions.Load(), RebuildPending: s.rebuildMarked.Load(),
		Producers: producers, DedupHits: s.counters.dedupHits.Load(), Delivered: s.counters.delivered.Load(), ScheduledPending: pending,
	}
}
