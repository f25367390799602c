package snapstore

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/fsm"
	"github.com/raftmq/raftmq/mmap"
	"github.com/raftmq/raftmq/store"
)

// Open returns the snapshot's metadata and its stream: for a linked
// snapshot, the header followed by the linked segments (read as they are
// streamed); for a received one, state.bin. While the reader is open,
// retention does not delete the snapshot.
func (s *Store) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	if !validID(id) {
		return nil, nil, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	b, err := s.register(id)
	if err != nil {
		return nil, nil, err
	}
	dir := filepath.Join(s.dir, id)
	var rc io.ReadCloser
	if b.Kind == kindLinked {
		rc, err = s.openLinked(dir, b.Meta.Size)
	} else {
		rc, err = s.openStream(dir, b.Meta.Size)
	}
	if err != nil {
		s.release(id)
		return nil, nil, fmt.Errorf("snapstore: open %s: %w", id, err)
	}
	s.opened.Add(1)
	meta := b.Meta
	return &meta, &reader{ReadCloser: rc, release: func() { s.release(id) }}, nil
}

// ReadHeader returns the FSM header of a snapshot without reading its
// segments (a stream snapshot's header is at the start of state.bin).
func (s *Store) ReadHeader(id string) (fsm.SnapshotHeader, error) {
	_, rc, err := s.Open(id)
	if err != nil {
		return fsm.SnapshotHeader{}, err
	}
	defer rc.Close()
	return fsm.ReadSnapshotHeader(rc)
}

func (s *Store) openLinked(dir string, size int64) (io.ReadCloser, error) {
	raw, err := readFile(s.fs, filepath.Join(dir, headerFile))
	if err != nil {
		return nil, err
	}
	h, err := fsm.ReadSnapshotHeader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if got := fsm.StreamSize(h); got != size {
		return nil, fmt.Errorf("%w: header gives a %d-byte stream, meta says %d", ErrCorrupt, got, size)
	}
	files := make([]store.SegmentFile, len(h.Segments))
	for i, ref := range h.Segments {
		path := filepath.Join(dir, segmentsDir, mmap.FileName(ref.Start))
		info, err := s.fs.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("%w: segment link: %w", ErrCorrupt, err)
		}
		if info.Size() < ref.Length {
			return nil, fmt.Errorf("%w: segment %d has %d bytes, needs %d", ErrCorrupt, ref.Start, info.Size(), ref.Length)
		}
		files[i] = store.SegmentFile{Path: path, Start: ref.Start, Size: ref.Length}
	}
	return fsm.NewSnapshotReader(h, files, fsm.FileSegments(s.fs))
}

func (s *Store) openStream(dir string, size int64) (io.ReadCloser, error) {
	f, err := s.fs.Open(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	got, err := f.Size()
	if err == nil && got != size {
		err = fmt.Errorf("%w: state.bin has %d bytes, meta says %d", ErrCorrupt, got, size)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	br := bufio.NewReaderSize(io.NewSectionReader(f, 0, size), 1<<20)
	return struct {
		io.Reader
		io.Closer
	}{br, f}, nil
}

// reader releases the snapshot (once) when closed.
type reader struct {
	io.ReadCloser
	release func()
	once    sync.Once
}

func (r *reader) Close() error {
	err := r.ReadCloser.Close()
	r.once.Do(r.release)
	return err
}
