package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/raftmq/raftmq/mmap"
	"github.com/raftmq/raftmq/recovery"
	"github.com/raftmq/raftmq/vfs"
)

// rebuildMarker: consume queues and index are rebuilt on open.
const rebuildMarker = recovery.RebuildMarker

// CaptureSnapshot returns the state as of the last applied entry; it costs
// O(metadata) and runs on the FSM goroutine between applies.
func (s *Store) CaptureSnapshot() Snapshot {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.RLock()
	defer s.mu.RUnlock()
	a := s.applied
	return Snapshot{
		AppliedIndex: a.RaftIndex, AppliedTerm: a.Term, ConfirmOffset: a.End,
		MinOffset: min(s.log.MinOffset(), a.End), LastEntryOffset: a.Offset, StoreTimestamp: a.StoreTimestamp,
		Meta: s.meta.Encode(),
	}
}

// SegmentFiles lists the segments holding [MinOffset, upTo). It fails with
// ErrClosed once Close has begun: a snapshot captured before a restore
// closed this store must not be persisted from the (emptied) segment list.
func (s *Store) SegmentFiles(upTo int64) ([]SegmentFile, error) {
	s.segMu.RLock()
	defer s.segMu.RUnlock()
	if s.closed.Load() {
		return nil, ErrClosed
	}
	var out []SegmentFile
	for _, seg := range s.log.Segments() {
		if seg.Start < upTo {
			out = append(out, SegmentFile{Path: seg.File.Name(), Start: seg.Start, Size: seg.File.Size()})
		}
	}
	return out, nil
}

// InstallSnapshot replaces the store in cfg.Dir by the snapshot: next yields
// each segment's start offset and a reader of its bytes up to
// min(segment end, snap.ConfirmOffset), oldest first. It stages the files in
// <dir>.staging, syncs them, then swaps directories (<dir> → <dir>.old,
// staging → <dir>) and removes the old one. Open undoes a half-done swap.
// The store must be closed; Open afterwards rebuilds queues and index.
func InstallSnapshot(fsys vfs.FS, cfg Config, snap Snapshot, next func() (start int64, r io.Reader, ok bool, err error)) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	staging := cfg.Dir + ".staging"
	if err := fsys.RemoveAll(staging); err != nil {
		return err
	}
	if err := fsys.MkdirAll(filepath.Join(staging, commitLogDir), 0o755); err != nil {
		return err
	}
	if err := stageSegments(fsys, cfg, staging, snap, next); err != nil {
		return err
	}
	// The segments are synced; their names must be too, or a power loss
	// after the swap leaves the checkpoint without its commitlog.
	if err := fsys.SyncDir(filepath.Join(staging, commitLogDir)); err != nil {
		return err
	}
	// The marker before the checkpoint: writing the checkpoint syncs the
	// staging directory, which makes the marker's name durable too.
	if err := writeMarker(fsys, staging); err != nil {
		return err
	}
	ckpt := recovery.Checkpoint{
		StoreTimestamp: snap.StoreTimestamp, ConfirmOffset: snap.ConfirmOffset, AppliedIndex: snap.AppliedIndex,
		AppliedTerm: snap.AppliedTerm, LastEntryOffset: snap.LastEntryOffset, MinOffset: snap.MinOffset, Meta: snap.Meta,
	}
	if err := recovery.WriteCheckpoint(fsys, staging, &ckpt); err != nil {
		return err
	}
	return swapDirs(fsys, cfg.Dir, staging)
}

func stageSegments(fsys vfs.FS, cfg Config, staging string, snap Snapshot, next func() (int64, io.Reader, bool, error)) error {
	expect := snap.MinOffset
	for {
		start, r, ok, err := next()
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		if start != expect || start%cfg.CommitLogFileSize != 0 {
			return fmt.Errorf("store: snapshot segment at %d, want %d", start, expect)
		}
		n, err := stageSegment(fsys, cfg, filepath.Join(staging, commitLogDir, mmap.FileName(start)), r)
		if err != nil {
			return err
		}
		expect = start + n
		if n < cfg.CommitLogFileSize {
			break
		}
	}
	if expect < snap.ConfirmOffset {
		return fmt.Errorf("store: snapshot ends at %d, want %d", expect, snap.ConfirmOffset)
	}
	return nil
}

func stageSegment(fsys vfs.FS, cfg Config, name string, r io.Reader) (int64, error) {
	f, err := fsys.Create(name)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if err := f.Preallocate(0, cfg.CommitLogFileSize); err != nil {
		return 0, err
	}
	if err := f.Truncate(cfg.CommitLogFileSize); err != nil {
		return 0, err
	}
	buf := make([]byte, 1<<20)
	var off int64
	for off < cfg.CommitLogFileSize {
		n, err := r.Read(buf[:min(int64(len(buf)), cfg.CommitLogFileSize-off)])
		if n > 0 {
			if _, werr := f.WriteAt(buf[:n], off); werr != nil {
				return 0, werr
			}
			off += int64(n)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	return off, f.Sync()
}

func writeMarker(fsys vfs.FS, dir string) error {
	return vfs.WriteFile(fsys, filepath.Join(dir, rebuildMarker), nil)
}

func swapDirs(fsys vfs.FS, dir, staging string) error {
	old := dir + ".old"
	if err := fsys.RemoveAll(old); err != nil {
		return err
	}
	if _, err := fsys.Stat(dir); err == nil {
		if err := fsys.Rename(dir, old); err != nil {
			return err
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := fsys.Rename(staging, dir); err != nil {
		return err
	}
	if err := fsys.SyncDir(filepath.Dir(dir)); err != nil {
		return err
	}
	return fsys.RemoveAll(old)
}

// rebuildIfMarked rebuilds consume queues and index from the commitlog
// start when a snapshot install left the marker.
func (s *Store) rebuildIfMarked(rp *recovery.Replay, scanFrom int64) (bool, error) {
	if _, err := s.fs.Stat(filepath.Join(s.cfg.Dir, rebuildMarker)); err != nil {
		return false, nil
	}
	return true, rp.RebuildAll(scanFrom)
}
