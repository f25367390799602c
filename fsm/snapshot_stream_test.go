package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"io/fs"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/raftmq/raftmq/store"
)

// The pull reader gives the same bytes however it is read, and StreamSize
// predicts their number.
func TestSnapshotReaderMatchesWriteSnapshot(t *testing.T) {
	written, h, data := streamFixture(t)
	// The format spelled out independently of the reader: header, per
	// segment its bytes and their CRC-32C, trailer.
	stream := EncodeSnapshotHeader(h)
	for _, ref := range h.Segments {
		seg := data[ref.Start][:ref.Length]
		stream = append(stream, seg...)
		stream = binary.BigEndian.AppendUint32(stream, crc32.Checksum(seg, castagnoli))
	}
	stream = binary.BigEndian.AppendUint32(stream, SnapshotEndMagic)
	if !bytes.Equal(written, stream) {
		t.Fatal("WriteSnapshot differs from the format")
	}
	if got := StreamSize(h); got != int64(len(stream)) {
		t.Fatalf("StreamSize %d, stream %d bytes", got, len(stream))
	}
	files := fixtureFiles(h, data)
	for name, wrap := range map[string]func(io.Reader) io.Reader{
		"whole":    func(r io.Reader) io.Reader { return r },
		"one-byte": iotest.OneByteReader,
		"half":     iotest.HalfReader,
	} {
		r, err := NewSnapshotReader(h, files, memSegments(data))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(wrap(r))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := r.Close(); err != nil {
			t.Fatalf("%s: close: %v", name, err)
		}
		if !bytes.Equal(got, stream) {
			t.Fatalf("%s: %d bytes differ from WriteSnapshot's %d", name, len(got), len(stream))
		}
	}
}

// A segment file shorter than its ref is an error, not a short stream.
func TestSnapshotReaderShortSegment(t *testing.T) {
	_, h, data := streamFixture(t)
	short := map[int64][]byte{}
	for k, v := range data {
		short[k] = v
	}
	short[4096] = short[4096][:100]
	r, err := NewSnapshotReader(h, fixtureFiles(h, short), memSegments(short))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := io.ReadAll(r); err == nil || !strings.Contains(err.Error(), "read 100 of 4096 bytes") {
		t.Fatalf("short segment: %v", err)
	}
	if _, err := NewSnapshotReader(h, nil, memSegments(data)); err == nil {
		t.Fatal("a header naming segments absent from the file list was accepted")
	}
}

func fixtureFiles(h SnapshotHeader, data map[int64][]byte) []store.SegmentFile {
	var files []store.SegmentFile
	for _, s := range h.Segments {
		files = append(files, store.SegmentFile{Path: "seg", Start: s.Start, Size: int64(len(data[s.Start]))})
	}
	return files
}

func memSegments(data map[int64][]byte) SegmentSource {
	return func(f store.SegmentFile) (io.ReaderAt, func() error, error) {
		return bytes.NewReader(data[f.Start]), func() error { return nil }, nil
	}
}

// Reading after Close fails with an error that says so (fs.ErrClosed), in
// the middle of the stream as well as before the first byte.
func TestSnapshotReaderReadAfterClose(t *testing.T) {
	_, h, data := streamFixture(t)
	for _, prefix := range []int{0, 10} {
		r, err := NewSnapshotReader(h, fixtureFiles(h, data), memSegments(data))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(r, make([]byte, prefix)); err != nil {
			t.Fatal(err)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if n, err := r.Read(make([]byte, 16)); n != 0 || !errors.Is(err, fs.ErrClosed) {
			t.Fatalf("after %d bytes and Close: Read = %d, %v", prefix, n, err)
		}
	}
}
