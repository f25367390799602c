package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"io/fs"

	"github.com/raftmq/raftmq/store"
)

// SegmentLinker is implemented by snapshot sinks that keep commitlog
// segments by reference (node/snapstore links them). Persist hands such a
// sink the header and the live segment files instead of writing the stream:
// segment bytes below the confirm offset never change, so the sink can
// produce the same stream later (NewSnapshotReader) at O(metadata) cost now.
// Sinks without it get the whole stream written to them.
type SegmentLinker interface {
	LinkSegments(h SnapshotHeader, files []store.SegmentFile) error
}

// StreamSize is the exact length of the stream WriteSnapshot produces for h.
func StreamSize(h SnapshotHeader) int64 {
	n := int64(len(EncodeSnapshotHeader(h))) + 4 // header, trailer
	for _, s := range h.Segments {
		n += s.Length + 4
	}
	return n
}

// NewSnapshotReader returns the snapshot stream of h (header, each segment's
// first Length bytes read from files through open plus its CRC, trailer) as
// a pull reader: no goroutine, one segment open at a time. Close releases
// the open segment.
func NewSnapshotReader(h SnapshotHeader, files []store.SegmentFile, open SegmentSource) (io.ReadCloser, error) {
	byStart := make(map[int64]store.SegmentFile, len(files))
	for _, f := range files {
		byStart[f.Start] = f
	}
	segs := make([]store.SegmentFile, len(h.Segments))
	for i, ref := range h.Segments {
		f, ok := byStart[ref.Start]
		if !ok {
			return nil, fmt.Errorf("fsm: snapshot segment %d not in the store's list", ref.Start)
		}
		segs[i] = f
	}
	var end [4]byte
	binary.BigEndian.PutUint32(end[:], SnapshotEndMagic)
	return &streamReader{pending: EncodeSnapshotHeader(h), refs: h.Segments, segs: segs,
		open: open, trailer: end[:]}, nil
}

// streamReader yields pending bytes, then segment i's bytes, then its CRC,
// and so on; the trailer last.
type streamReader struct {
	pending []byte // header, a segment CRC or the trailer, not yet read
	refs    []SegmentRef
	segs    []store.SegmentFile
	open    SegmentSource
	next    int // next segment to open

	cur      *io.SectionReader // the open segment's remaining bytes
	curRef   SegmentRef
	curClose func() error
	crc      hash.Hash32

	trailer []byte // nil once queued
	err     error
}

func (r *streamReader) Read(p []byte) (int, error) {
	for r.err == nil {
		switch {
		case len(r.pending) > 0:
			n := copy(p, r.pending)
			r.pending = r.pending[n:]
			return n, nil
		case r.cur != nil:
			n, err := r.readSegment(p)
			if n > 0 || err != nil {
				return n, err
			}
		case r.next < len(r.refs):
			r.err = r.openNext()
		case r.trailer != nil:
			r.pending, r.trailer = r.trailer, nil
		default:
			r.err = io.EOF
		}
	}
	return 0, r.err
}

func (r *streamReader) openNext() error {
	ref, f := r.refs[r.next], r.segs[r.next]
	r.next++
	ra, closeFn, err := r.open(f)
	if err != nil {
		return fmt.Errorf("fsm: open segment %d: %w", f.Start, err)
	}
	r.cur, r.curRef, r.curClose = io.NewSectionReader(ra, 0, ref.Length), ref, closeFn
	if r.crc == nil {
		r.crc = crc32.New(castagnoli)
	}
	r.crc.Reset()
	return nil
}

// readSegment reads from the open segment; at its end it queues the CRC and
// closes the file. A file shorter than the ref is an error.
func (r *streamReader) readSegment(p []byte) (int, error) {
	n, err := r.cur.Read(p)
	r.crc.Write(p[:n])
	if errors.Is(err, io.EOF) {
		if left := r.cur.Size() - mustSeek(r.cur); left > 0 {
			r.err = fmt.Errorf("fsm: segment %d: read %d of %d bytes", r.curRef.Start, r.curRef.Length-left, r.curRef.Length)
			return n, r.err
		}
		r.pending = binary.BigEndian.AppendUint32(nil, r.crc.Sum32())
		r.err = r.closeSegment()
		return n, r.err
	}
	if err != nil {
		r.err = fmt.Errorf("fsm: read segment %d: %w", r.curRef.Start, err)
		return n, r.err
	}
	return n, nil
}

func mustSeek(s *io.SectionReader) int64 {
	off, _ := s.Seek(0, io.SeekCurrent) // never fails for SeekCurrent
	return off
}

func (r *streamReader) closeSegment() error {
	r.cur = nil
	if r.curClose == nil {
		return nil
	}
	err := r.curClose()
	r.curClose = nil
	if err != nil {
		return fmt.Errorf("fsm: close segment %d: %w", r.curRef.Start, err)
	}
	return nil
}

// Close releases the segment being read, if any.
func (r *streamReader) Close() error {
	err := r.closeSegment()
	if r.err == nil {
		r.err = fmt.Errorf("fsm: snapshot reader: %w", fs.ErrClosed)
	}
	return err
}
