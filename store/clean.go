package store

import (
	"fmt"

	"github.com/raftmq/raftmq/mmap"
)

// maxDeletesPerRun bounds how many segments one retention pass removes
// (RocketMQ's deleteFileBatchMax).
const maxDeletesPerRun = 10

// clean is the retention pass: delete the oldest commitlog segments that
// are expired by time, or all that may go when the disk is too full; then
// the consume-queue and index files that only point below the new minimum.
// A segment is only deleted when it lies wholly below the last checkpoint,
// never the last one, and oldest first, so offsets never get holes.
func (s *Store) clean() error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	now := s.cfg.Now()
	forcibly := s.diskUsedPercent() >= s.cfg.CleanForciblyRatio
	overMax := s.diskUsedPercent() >= s.cfg.DiskMaxUsedSpaceRatio
	ckpt := s.ckptOffset.Load()
	pinned, err := s.pendingMinPhy()
	if err != nil {
		return fmt.Errorf("retention: pending scheduled messages: %w", err)
	}
	keep := func(seg mmap.Segment) bool {
		if seg.End() > ckpt || pinned >= 0 && seg.End() > pinned {
			return true // not yet checkpointed, or holding pending scheduled messages
		}
		if forcibly || overMax {
			return false
		}
		info, err := s.fs.Stat(seg.File.Name())
		return err != nil || now.Sub(info.ModTime()) < s.cfg.FileReservedTime
	}
	s.writeMu.Lock()
	s.segMu.Lock()
	deleted, err := s.log.DeleteExpired(maxDeletesPerRun, keep)
	s.segMu.Unlock()
	minOffset := s.log.MinOffset()
	s.writeMu.Unlock()
	if err != nil {
		return s.failClosed(fmt.Errorf("retention: %w", err))
	}
	if deleted == 0 {
		return nil
	}
	s.counters.segmentsDeleted.Add(uint64(deleted))
	// The index files about to go may hold the state the checkpoint names
	// (the periodic flush checkpoints the index less often than the rest):
	// checkpoint the current index first, so recovery never looks for it.
	if err := s.flushLocked(true); err != nil {
		return err
	}
	s.logger.Info("retention deleted commitlog segments", "count", deleted, "minOffset", minOffset, "forcibly", forcibly)
	if err := s.cleanDerived(minOffset); err != nil {
		return s.failClosed(fmt.Errorf("retention: %w", err))
	}
	return nil
}

// RunRetention runs one retention pass now, as the store's own loop does
// every CleanInterval: the FSM runs one before each retry of an entry a
// full disk refused, since it reopens the store more often than that.
func (s *Store) RunRetention() error {
	if s.closed.Load() {
		return ErrClosed
	}
	return s.clean()
}

func (s *Store) cleanDerived(minOffset int64) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	for _, q := range s.cqs.Queues() {
		if _, err := q.DeleteBelowPhy(minOffset); err != nil {
			return err
		}
	}
	_, err := s.idx.DeleteBelow(minOffset)
	return err
}

// diskUsedPercent is the used share of the file system holding the store;
// 0 when it cannot be known (vfs.ErrNoSpaceInfo: an in-memory file system
// without a capacity).
func (s *Store) diskUsedPercent() int {
	sp, err := s.fs.Space(s.cfg.Dir)
	if err != nil {
		return 0
	}
	return usedPercent(sp.Total, sp.Free, sp.Avail)
}

// usedPercent is df's Use% and RocketMQ's getDiskPartitionSpaceUsedPercent:
// used / (used + available to us), with used = total - free. Blocks
// reserved for root (free but not available) count as neither, so a disk
// with a large reserve is not taken for full.
func usedPercent(blocks, free, avail uint64) int {
	used := blocks - min(free, blocks)
	if used+avail == 0 {
		return 0
	}
	return int((used*100 + used + avail - 1) / (used + avail))
}
