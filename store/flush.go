package store

import (
	"fmt"
	"time"

	"github.com/raftmq/raftmq/recovery"
)

// flushPoll is how often the service loop looks at the flush lag: a tenth
// of FlushInterval, at most 100 ms.
func (c *Config) flushPoll() time.Duration {
	return max(min(c.FlushInterval/10, 100*time.Millisecond), time.Millisecond)
}

// serviceLoop is the store's one goroutine: flush every FlushInterval or
// once FlushBytes of commitlog wait (looked at every flushPoll), retention
// every CleanInterval.
func (s *Store) serviceLoop() {
	defer s.wg.Done()
	pollTick := time.NewTicker(s.cfg.flushPoll())
	defer pollTick.Stop()
	cleanTick := time.NewTicker(s.cfg.CleanInterval)
	defer cleanTick.Stop()
	lastFlush := time.Now()
	for {
		select {
		case <-s.stop:
			return
		case now := <-pollTick.C:
			s.touchAhead()
			if now.Sub(lastFlush) < s.cfg.FlushInterval && s.flushLag() < s.cfg.FlushBytes {
				continue
			}
			lastFlush = now
			_ = s.flushPeriodic() // a failure fails the store closed and is logged there
			s.counters.diskUsedPercent.Store(int32(s.diskUsedPercent()))
		case <-cleanTick.C:
			if err := s.clean(); err != nil {
				s.logger.Error("retention failed", "error", err)
			}
		}
	}
}

// touchAhead faults in the commitlog pages the next appends will write
// (Config.TouchAhead) on this goroutine, so the apply path does not.
func (s *Store) touchAhead() {
	if s.cfg.TouchAhead <= 0 {
		return
	}
	s.segMu.RLock() // the segments stay mapped (see flushCommitLog)
	defer s.segMu.RUnlock()
	s.log.TouchAhead(s.cfg.TouchAhead)
}

// flushLag is how many applied commitlog bytes are not flushed yet.
func (s *Store) flushLag() int64 {
	return s.ConfirmOffset() - s.flushedOffset.Load()
}

// Flush makes everything applied so far durable and writes the checkpoint.
func (s *Store) Flush() error {
	if s.closed.Load() {
		return ErrClosed
	}
	return s.flush()
}

// FlushTo makes the commitlog durable at least up to offset and writes a
// checkpoint covering it (Persist calls it before Raft may compact). The
// index is left to its own schedule (IndexFlushInterval): the checkpoint
// carries the index state of its last flush and recovery re-indexes from
// the durable commitlog, so a snapshot, taken every few seconds under load,
// does not also rewrite the slot table.
func (s *Store) FlushTo(offset int64) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if s.ckptOffset.Load() >= offset {
		return nil
	}
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	return s.flushLocked(!s.ckptWritten)
}

// flush makes everything durable, the index included (Flush, Close,
// recovery, retention). flushMu serialises whole flushes.
func (s *Store) flush() error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	return s.flushLocked(true)
}

// flushPeriodic is the service loop's flush: the index only every
// IndexFlushInterval, or once nothing was applied since the last checkpoint
// (an idle store makes its index durable at once, and a crash after a burst
// of writes then re-indexes nothing).
func (s *Store) flushPeriodic() error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	idle := s.ckptWritten && s.ckptOffset.Load() == s.ConfirmOffset()
	return s.flushLocked(!s.ckptWritten || idle || time.Since(s.idxFlushedAt) >= s.cfg.IndexFlushInterval)
}

// flushLocked flushes the commitlog, the consume queues and, with
// withIndex, the index, then writes the checkpoint. Without withIndex the
// checkpoint carries the index state of the last index flush (idxDurable),
// which recovery re-indexes from. flushMu is held.
func (s *Store) flushLocked(withIndex bool) error {
	if err := s.failed(); err != nil {
		return err
	}
	started := time.Now()
	ckpt, segs := s.captureCheckpoint()
	upToDate := ckpt.ConfirmOffset == s.ckptOffset.Load() && s.flushedOffset.Load() >= ckpt.ConfirmOffset && s.ckptWritten
	if upToDate && (!withIndex || s.idxDurable.ConfirmOffset == ckpt.ConfirmOffset) {
		return nil
	}
	if !withIndex {
		ckpt.Index = s.idxDurable
	}
	// 1. commitlog up to confirm, outside writeMu: those bytes never change.
	if err := s.flushCommitLog(segs, ckpt.ConfirmOffset); err != nil {
		return s.failClosed(fmt.Errorf("commitlog: %w: %w", ErrSyncFailed, err))
	}
	// 2. consume queues, 3. index: they may hold more than confirm; recovery
	// cuts what lies above the checkpoint. Appends go on meanwhile (each
	// queue and the index hold their writer only to sync, or to take what is
	// dirty), and everything the captured checkpoint covers was written
	// before: writeMu is not held, so an index msync of tens of megabytes no
	// longer stalls every apply.
	err := s.cqs.Flush()
	if err == nil && withIndex {
		err = s.idx.Flush()
	}
	if err != nil {
		return s.failClosed(fmt.Errorf("consume queues or index: %w: %w", ErrSyncFailed, err))
	}
	// 4. the checkpoint, atomically, last.
	if err := recovery.WriteCheckpoint(s.fs, s.cfg.Dir, &ckpt); err != nil {
		return s.failClosed(fmt.Errorf("checkpoint: %w", err))
	}
	s.ckptOffset.Store(ckpt.ConfirmOffset)
	s.ckptWritten = true
	if withIndex {
		s.idxDurable, s.idxFlushedAt = ckpt.Index, started
	}
	s.counters.flushes.Add(1)
	s.counters.lastFlushNanos.Store(int64(time.Since(started)))
	return nil
}

// captureCheckpoint takes a consistent cut: the last applied entry, meta and
// the index state as of that entry.
func (s *Store) captureCheckpoint() (recovery.Checkpoint, []segmentRange) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.RLock()
	a := s.applied
	metaBytes := s.meta.Encode()
	s.mu.RUnlock()
	c := recovery.Checkpoint{
		StoreTimestamp: a.StoreTimestamp, ConfirmOffset: a.End, AppliedIndex: a.RaftIndex, AppliedTerm: a.Term,
		LastEntryOffset: a.Offset, MinOffset: s.log.MinOffset(), Meta: metaBytes,
		Index: recovery.IndexState{State: s.idx.State(), ConfirmOffset: a.End},
	}
	if c.MinOffset > c.ConfirmOffset {
		c.MinOffset = c.ConfirmOffset
	}
	var segs []segmentRange
	from := s.flushedOffset.Load()
	for _, seg := range s.log.Segments() {
		if seg.End() > from && seg.Start < a.End {
			segs = append(segs, segmentRange{file: seg.File, start: seg.Start})
		}
	}
	return c, segs
}

// flushCommitLog msyncs [flushedOffset, upTo) of the captured segments.
func (s *Store) flushCommitLog(segs []segmentRange, upTo int64) error {
	from := s.flushedOffset.Load()
	s.segMu.RLock()
	defer s.segMu.RUnlock()
	for _, seg := range segs {
		lo, hi := max(from, seg.start)-seg.start, min(upTo, seg.start+seg.file.Size())-seg.start
		if lo < hi {
			if err := seg.file.Flush(lo, hi); err != nil {
				return err
			}
		}
	}
	if upTo > from {
		s.flushedOffset.Store(upTo)
	}
	return nil
}

// failClosed records the first failed sync or entry write: from then on the store takes
// no writes (checkWritable), writes no checkpoint (flush) and keeps its
// abort file (Close), and OnFailure is told once. It returns the failure,
// which wraps ErrFailedClosed and cause.
func (s *Store) failClosed(cause error) error {
	err := fmt.Errorf("%w: %w", ErrFailedClosed, cause)
	if !s.failure.CompareAndSwap(nil, &err) {
		return *s.failure.Load()
	}
	s.logger.Error("I/O failed: the store takes no more writes; reopen it to recover from disk", "error", cause)
	if s.cfg.OnFailure != nil {
		s.cfg.OnFailure(err)
	}
	return err
}

// failed returns the failure recorded by failClosed, or nil.
func (s *Store) failed() error {
	if p := s.failure.Load(); p != nil {
		return *p
	}
	return nil
}

// Failed reports the failure that closed the store to writes (it wraps
// ErrFailedClosed), or nil.
func (s *Store) Failed() error { return s.failed() }
