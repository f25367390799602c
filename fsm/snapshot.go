package fsm

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"sort"

	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/vfs"
)

// ErrBadSnapshot is returned (wrapped) for a snapshot stream that is
// truncated, corrupt or of an unknown version.
var ErrBadSnapshot = errors.New("fsm: bad snapshot stream")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// SegmentRef is one segment in a snapshot stream header.
type SegmentRef struct {
	Start  int64
	Length int64
}

// SnapshotHeader is the decoded header of a snapshot stream.
type SnapshotHeader struct {
	Store    store.Snapshot
	Members  map[string]string // server id → API address
	Segments []SegmentRef
}

// SegmentSource opens the bytes of one segment for WriteSnapshot.
type SegmentSource func(seg store.SegmentFile) (io.ReaderAt, func() error, error)

// FileSegments reads segments through fs.
func FileSegments(fs vfs.FS) SegmentSource {
	return func(seg store.SegmentFile) (io.ReaderAt, func() error, error) {
		f, err := fs.Open(seg.Path)
		if err != nil {
			return nil, nil, err
		}
		return f, f.Close, nil
	}
}

// SegmentRefs turns the store's segment list into the refs of a snapshot up
// to confirm: each segment's bytes below confirm.
func SegmentRefs(files []store.SegmentFile, confirm int64) []SegmentRef {
	refs := make([]SegmentRef, 0, len(files))
	for _, f := range files {
		n := min(f.Size, confirm-f.Start)
		if n <= 0 {
			continue
		}
		refs = append(refs, SegmentRef{Start: f.Start, Length: n})
	}
	return refs
}

// WriteSnapshot writes the whole stream: header, segments, trailer.
func WriteSnapshot(w io.Writer, h SnapshotHeader, files []store.SegmentFile, open SegmentSource) error {
	r, err := NewSnapshotReader(h, files, open)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	_, err = io.Copy(bw, r)
	if cerr := r.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return bw.Flush()
}

// EncodeSnapshotHeader returns the header bytes including their CRC.
func EncodeSnapshotHeader(h SnapshotHeader) []byte {
	b := binary.BigEndian.AppendUint32(nil, SnapshotMagic)
	b = binary.BigEndian.AppendUint16(b, SnapshotVersion)
	b = binary.BigEndian.AppendUint64(b, h.Store.AppliedIndex)
	b = binary.BigEndian.AppendUint64(b, h.Store.AppliedTerm)
	b = binary.BigEndian.AppendUint64(b, uint64(h.Store.ConfirmOffset))
	b = binary.BigEndian.AppendUint64(b, uint64(h.Store.MinOffset))
	b = binary.BigEndian.AppendUint64(b, uint64(h.Store.LastEntryOffset))
	b = binary.BigEndian.AppendUint64(b, uint64(h.Store.StoreTimestamp))
	b = binary.BigEndian.AppendUint32(b, uint32(len(h.Store.Meta)))
	b = append(b, h.Store.Meta...)
	ids := make([]string, 0, len(h.Members))
	for id := range h.Members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	b = binary.BigEndian.AppendUint32(b, uint32(len(ids)))
	for _, id := range ids {
		b = appendStr16(b, id)
		b = appendStr16(b, h.Members[id])
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(h.Segments)))
	for _, s := range h.Segments {
		b = binary.BigEndian.AppendUint64(b, uint64(s.Start))
		b = binary.BigEndian.AppendUint64(b, uint64(s.Length))
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func appendStr16(b []byte, s string) []byte {
	if len(s) > MaxStringBytes {
		s = s[:MaxStringBytes]
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// headerReader reads header fields while hashing them.
type headerReader struct {
	r   io.Reader
	crc hash.Hash32
	err error
}

func (h *headerReader) read(n int) []byte {
	if h.err != nil {
		return make([]byte, n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(h.r, b); err != nil {
		h.err = fmt.Errorf("%w: header: %v", ErrBadSnapshot, err)
		return b
	}
	h.crc.Write(b)
	return b
}

func (h *headerReader) u16() uint16 { return binary.BigEndian.Uint16(h.read(2)) }
func (h *headerReader) u32() uint32 { return binary.BigEndian.Uint32(h.read(4)) }
func (h *headerReader) u64() uint64 { return binary.BigEndian.Uint64(h.read(8)) }

func (h *headerReader) bounded(limit uint32, what string) int {
	n := h.u32()
	if n > limit && h.err == nil {
		h.err = fmt.Errorf("%w: %s count %d > %d", ErrBadSnapshot, what, n, limit)
	}
	if h.err != nil {
		return 0
	}
	return int(n)
}

func (h *headerReader) str16() string {
	n := int(h.u16())
	if n > MaxStringBytes && h.err == nil {
		h.err = fmt.Errorf("%w: string of %d bytes", ErrBadSnapshot, n)
	}
	if h.err != nil {
		return ""
	}
	return string(h.read(n))
}

// ReadSnapshotHeader reads and verifies the header at the start of r.
func ReadSnapshotHeader(r io.Reader) (SnapshotHeader, error) {
	hr := &headerReader{r: r, crc: crc32.New(castagnoli)}
	var h SnapshotHeader
	if m := hr.u32(); m != SnapshotMagic && hr.err == nil {
		return h, fmt.Errorf("%w: magic %#x", ErrBadSnapshot, m)
	}
	if v := hr.u16(); v != SnapshotVersion && hr.err == nil {
		return h, fmt.Errorf("%w: version %d", ErrBadSnapshot, v)
	}
	h.Store.AppliedIndex, h.Store.AppliedTerm = hr.u64(), hr.u64()
	h.Store.ConfirmOffset, h.Store.MinOffset = int64(hr.u64()), int64(hr.u64())
	h.Store.LastEntryOffset, h.Store.StoreTimestamp = int64(hr.u64()), int64(hr.u64())
	if n := hr.bounded(maxSnapshotMeta, "meta"); n > 0 {
		h.Store.Meta = readChunked(hr, n)
	}
	h.Members = make(map[string]string)
	for i, n := 0, hr.bounded(maxSnapshotMembers, "member"); i < n && hr.err == nil; i++ {
		id := hr.str16()
		h.Members[id] = hr.str16()
	}
	n := hr.bounded(maxSnapshotSegments, "segment")
	for i := 0; i < n && hr.err == nil; i++ {
		h.Segments = append(h.Segments, SegmentRef{Start: int64(hr.u64()), Length: int64(hr.u64())})
	}
	if hr.err != nil {
		return SnapshotHeader{}, hr.err
	}
	want := hr.crc.Sum32()
	var sum [4]byte
	if _, err := io.ReadFull(r, sum[:]); err != nil {
		return SnapshotHeader{}, fmt.Errorf("%w: header crc: %v", ErrBadSnapshot, err)
	}
	if got := binary.BigEndian.Uint32(sum[:]); got != want {
		return SnapshotHeader{}, fmt.Errorf("%w: header crc %#x, want %#x", ErrBadSnapshot, got, want)
	}
	return h, validateHeader(h)
}

// readChunked reads n bytes in bounded chunks so a lying length cannot make
// one huge allocation before the stream runs out.
func readChunked(hr *headerReader, n int) []byte {
	var out []byte
	for n > 0 && hr.err == nil {
		c := min(n, 1<<20)
		out = append(out, hr.read(c)...)
		n -= c
	}
	return out
}

// validateHeader checks that the segments are in order and hold exactly
// [MinOffset, ConfirmOffset), which store.InstallSnapshot needs: a header
// that claims an offset without the bytes for it is refused before the
// receiver's store is touched.
func validateHeader(h SnapshotHeader) error {
	end := h.Store.MinOffset
	for i, s := range h.Segments {
		if s.Length <= 0 || s.Start < 0 || (i > 0 && s.Start != end) || s.Start+s.Length > h.Store.ConfirmOffset {
			return fmt.Errorf("%w: segment [%d,+%d) out of order or past confirm offset %d",
				ErrBadSnapshot, s.Start, s.Length, h.Store.ConfirmOffset)
		}
		end = s.Start + s.Length
	}
	if len(h.Segments) > 0 && h.Segments[0].Start != h.Store.MinOffset {
		return fmt.Errorf("%w: first segment at %d, min offset %d", ErrBadSnapshot, h.Segments[0].Start, h.Store.MinOffset)
	}
	if end != h.Store.ConfirmOffset {
		return fmt.Errorf("%w: segments end at %d, confirm offset %d", ErrBadSnapshot, end, h.Store.ConfirmOffset)
	}
	return nil
}

// segmentReader yields exactly one segment's bytes and then checks its CRC:
// a mismatch is returned instead of io.EOF, so the store never renames a
// corrupt segment into place.
type segmentReader struct {
	r      io.Reader
	left   int64
	crc    hash.Hash32
	start  int64
	err    error
	verify bool
}

func (s *segmentReader) Read(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	if s.left == 0 {
		s.err = s.finish()
		return 0, s.err
	}
	if int64(len(p)) > s.left {
		p = p[:s.left]
	}
	n, err := s.r.Read(p)
	s.crc.Write(p[:n])
	s.left -= int64(n)
	if err == io.EOF && s.left > 0 {
		err = fmt.Errorf("%w: segment %d truncated", ErrBadSnapshot, s.start)
	}
	if err != nil && err != io.EOF {
		s.err = err
	}
	return n, s.err
}

func (s *segmentReader) finish() error {
	var sum [4]byte
	if _, err := io.ReadFull(s.r, sum[:]); err != nil {
		return fmt.Errorf("%w: segment %d crc: %v", ErrBadSnapshot, s.start, err)
	}
	if got, want := binary.BigEndian.Uint32(sum[:]), s.crc.Sum32(); got != want {
		return fmt.Errorf("%w: segment %d crc %#x, want %#x", ErrBadSnapshot, s.start, got, want)
	}
	s.verify = true
	return io.EOF
}

// drain reads what the store left unread of the segment (and its CRC).
func (s *segmentReader) drain() error {
	if s.verify {
		return nil
	}
	if _, err := io.Copy(io.Discard, s); err != nil {
		return err
	}
	if !s.verify {
		return s.err
	}
	return nil
}

// SegmentIterator walks the segments of a stream after its header; its Next
// has the shape store.InstallSnapshot wants. Call Finish after the last one.
type SegmentIterator struct {
	r    io.Reader
	h    SnapshotHeader
	i    int
	cur  *segmentReader
	done bool // trailer read
	err  error
}

// NewSegmentIterator reads segments from r, positioned after the header h.
func NewSegmentIterator(r io.Reader, h SnapshotHeader) *SegmentIterator {
	return &SegmentIterator{r: r, h: h}
}

// Next returns the next segment's start and a reader of its verified bytes.
func (it *SegmentIterator) Next() (int64, io.Reader, bool, error) {
	if it.err != nil {
		return 0, nil, false, it.err
	}
	if it.cur != nil {
		if it.err = it.cur.drain(); it.err != nil {
			return 0, nil, false, it.err
		}
		it.cur = nil
	}
	if it.i == len(it.h.Segments) {
		if !it.done {
			it.err = it.trailer()
			it.done = true
		}
		return 0, nil, false, it.err
	}
	ref := it.h.Segments[it.i]
	it.i++
	it.cur = &segmentReader{r: it.r, left: ref.Length, crc: crc32.New(castagnoli), start: ref.Start}
	return ref.Start, it.cur, true, nil
}

// Finish reads any segments the caller skipped and checks the trailer, so
// the whole stream has been verified when it returns nil.
func (it *SegmentIterator) Finish() error {
	for {
		_, _, ok, err := it.Next()
		if err != nil || !ok {
			return err
		}
	}
}

func (it *SegmentIterator) trailer() error {
	var end [4]byte
	if _, err := io.ReadFull(it.r, end[:]); err != nil {
		return fmt.Errorf("%w: trailer: %v", ErrBadSnapshot, err)
	}
	if m := binary.BigEndian.Uint32(end[:]); m != SnapshotEndMagic {
		return fmt.Errorf("%w: trailer magic %#x", ErrBadSnapshot, m)
	}
	return nil
}
