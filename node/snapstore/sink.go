package snapstore

import (
	"bufio"
	"errors"
	"fmt"
	"path/filepath"
	"syscall"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/fsm"
	"github.com/raftmq/raftmq/mmap"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/vfs"
)

// sink is one snapshot being written into its .tmp directory: either a
// stream (Write) or a header with segment links (LinkSegments), not both.
type sink struct {
	s    *Store
	meta raft.SnapshotMeta
	tmp  string
	kind string // "" until the first Write or LinkSegments
	done bool
	// closeErr is what the first Close returned (raft calls Close again
	// after FSMSnapshot.Persist closed the sink).
	closeErr error

	state vfs.File // stream: state.bin
	w     *bufio.Writer
	fw    *fileWriter
}

var (
	_ raft.SnapshotSink = (*sink)(nil)
	_ fsm.SegmentLinker = (*sink)(nil)
)

// ID is the snapshot's ID.
func (k *sink) ID() string { return k.meta.ID }

// Write appends stream bytes to state.bin.
func (k *sink) Write(p []byte) (int, error) {
	if k.done || k.kind == kindLinked {
		return 0, fmt.Errorf("%w: write to a %s sink (closed %v)", ErrSinkState, k.kind, k.done)
	}
	if k.kind == "" {
		if err := k.startStream(); err != nil {
			return 0, err
		}
	}
	return k.w.Write(p)
}

func (k *sink) startStream() error {
	f, err := k.s.fs.Create(filepath.Join(k.tmp, stateFile))
	if err != nil {
		return fmt.Errorf("snapstore: %w", err)
	}
	k.kind, k.state, k.fw = kindStream, f, &fileWriter{f: f}
	k.w = bufio.NewWriterSize(k.fw, 1<<20)
	return nil
}

// LinkSegments records the FSM header and hard-links the segment bytes it
// refers to (fsm.SegmentLinker): O(number of segments), no data copied.
func (k *sink) LinkSegments(h fsm.SnapshotHeader, files []store.SegmentFile) error {
	if k.done || k.kind != "" {
		return fmt.Errorf("%w: link into a %q sink (closed %v)", ErrSinkState, k.kind, k.done)
	}
	k.kind = kindLinked
	if err := vfs.WriteFile(k.s.fs, filepath.Join(k.tmp, headerFile), fsm.EncodeSnapshotHeader(h)); err != nil {
		return fmt.Errorf("snapstore: header: %w", err)
	}
	segDir := filepath.Join(k.tmp, segmentsDir)
	if err := k.s.fs.MkdirAll(segDir, 0o755); err != nil {
		return fmt.Errorf("snapstore: %w", err)
	}
	byStart := make(map[int64]store.SegmentFile, len(files))
	for _, f := range files {
		byStart[f.Start] = f
	}
	for _, ref := range h.Segments {
		f, ok := byStart[ref.Start]
		if !ok {
			return fmt.Errorf("snapstore: segment %d not among the store's files", ref.Start)
		}
		if err := k.linkSegment(f.Path, filepath.Join(segDir, mmap.FileName(ref.Start)), ref.Length); err != nil {
			return err
		}
	}
	if err := k.s.fs.SyncDir(segDir); err != nil {
		return fmt.Errorf("snapstore: %w", err)
	}
	k.meta.Size = fsm.StreamSize(h)
	return nil
}

// linkSegment hard-links src as dst, or copies its first length bytes when
// the file system refuses the link (another device, no link support).
func (k *sink) linkSegment(src, dst string, length int64) error {
	err := k.s.fs.Link(src, dst)
	if err != nil && linkUnsupported(err) {
		k.s.log.Warn("cannot hard-link a segment into the snapshot; copying it (O(size))",
			"segment", src, "error", err)
		k.s.copied.Add(1)
		err = copyPrefix(k.s.fs, src, dst, length)
	}
	if err != nil {
		return fmt.Errorf("snapstore: link segment %s: %w", src, err)
	}
	info, err := k.s.fs.Stat(dst)
	if err != nil {
		return fmt.Errorf("snapstore: %w", err)
	}
	if info.Size() < length {
		return fmt.Errorf("%w: segment %s has %d bytes, snapshot needs %d", ErrCorrupt, src, info.Size(), length)
	}
	return nil
}

func linkUnsupported(err error) bool {
	for _, e := range []error{syscall.EXDEV, syscall.EPERM, syscall.EMLINK, syscall.ENOTSUP, errors.ErrUnsupported} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func copyPrefix(fsys vfs.FS, src, dst string, length int64) error {
	in, err := fsys.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := fsys.Create(dst)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for off := int64(0); off < length; {
		n, err := in.ReadAt(buf[:min(int64(len(buf)), length-off)], off)
		if n > 0 {
			if _, werr := out.WriteAt(buf[:n], off); werr != nil {
				out.Close()
				return werr
			}
			off += int64(n)
		}
		if err != nil && off < length {
			out.Close()
			return err
		}
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// Close finishes the snapshot: sync, meta.json, sync, rename .tmp into
// place, sync the parent; then retention runs. Closing again returns the
// first result; closing a cancelled sink returns nil.
func (k *sink) Close() error {
	if k.done {
		return k.closeErr // raft closes again after Persist closed: idempotent
	}
	k.done = true
	if err := k.finish(); err != nil {
		k.closeState()
		_ = k.s.fs.RemoveAll(k.tmp)
		k.closeErr = err
		return err
	}
	if k.kind == kindLinked {
		k.s.linked.Add(1)
	} else {
		k.s.streams.Add(1)
	}
	k.s.log.Info("snapshot stored", "id", k.meta.ID, "kind", k.kind, "index", k.meta.Index, "size", k.meta.Size)
	if err := k.s.reap(); err != nil { // the snapshot itself is complete
		k.s.log.Warn("snapshot retention failed", "error", err)
	}
	return nil
}

func (k *sink) finish() error {
	if k.kind == "" { // nothing written: an empty stream
		if err := k.startStream(); err != nil {
			return err
		}
	}
	if k.kind == kindStream {
		if err := k.w.Flush(); err != nil {
			return fmt.Errorf("snapstore: %w", err)
		}
		k.meta.Size = k.fw.off
		if err := k.state.Sync(); err != nil {
			return fmt.Errorf("snapstore: %w", err)
		}
		if err := k.closeState(); err != nil {
			return fmt.Errorf("snapstore: %w", err)
		}
	}
	data, err := encodeMeta(metaBody{Version: formatVersion, Kind: k.kind, Meta: k.meta})
	if err != nil {
		return fmt.Errorf("snapstore: %w", err)
	}
	if err := vfs.WriteFile(k.s.fs, filepath.Join(k.tmp, metaFile), data); err != nil {
		return fmt.Errorf("snapstore: meta: %w", err)
	}
	if err := k.s.fs.SyncDir(k.tmp); err != nil {
		return fmt.Errorf("snapstore: %w", err)
	}
	if err := k.s.fs.Rename(k.tmp, filepath.Join(k.s.dir, k.meta.ID)); err != nil {
		return fmt.Errorf("snapstore: %w", err)
	}
	if err := k.s.fs.SyncDir(k.s.dir); err != nil {
		return fmt.Errorf("snapstore: %w", err)
	}
	return nil
}

func (k *sink) closeState() error {
	if k.state == nil {
		return nil
	}
	err := k.state.Close()
	k.state = nil
	return err
}

// Cancel abandons the snapshot and removes its directory.
func (k *sink) Cancel() error {
	if k.done {
		return nil
	}
	k.done = true
	k.closeState()
	k.s.log.Debug("snapshot cancelled", "id", k.meta.ID)
	if err := k.s.fs.RemoveAll(k.tmp); err != nil {
		return fmt.Errorf("snapstore: %w", err)
	}
	return nil
}

// fileWriter is an io.Writer appending to a vfs.File (which has no position).
type fileWriter struct {
	f   vfs.File
	off int64
}

func (w *fileWriter) Write(p []byte) (int, error) {
	n, err := w.f.WriteAt(p, w.off)
	w.off += int64(n)
	return n, err
}
