package fsm

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/raftmq/raftmq/store"
)

// streamFixture writes a snapshot stream of three segments (the last one cut
// at the confirm offset) and returns it with the segment contents.
func streamFixture(t *testing.T) ([]byte, SnapshotHeader, map[int64][]byte) {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	const segSize = 4096
	data := map[int64][]byte{}
	var files []store.SegmentFile
	for i := int64(0); i < 3; i++ {
		b := make([]byte, segSize)
		for j := range b {
			b[j] = byte(r.IntN(256))
		}
		data[i*segSize] = b
		files = append(files, store.SegmentFile{Path: "seg", Start: i * segSize, Size: segSize})
	}
	confirm := int64(2*segSize + 1000)
	snap := store.Snapshot{AppliedIndex: 42, AppliedTerm: 3, ConfirmOffset: confirm, MinOffset: 0, Meta: []byte("meta")}
	h := SnapshotHeader{Store: snap, Members: map[string]string{"n1": "127.0.0.1:9001"}, Segments: SegmentRefs(files, confirm)}
	open := func(f store.SegmentFile) (io.ReaderAt, func() error, error) {
		return bytes.NewReader(data[f.Start]), func() error { return nil }, nil
	}
	var buf bytes.Buffer
	if err := WriteSnapshot(&buf, h, files, open); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), h, data
}

func readAll(stream []byte) (SnapshotHeader, map[int64][]byte, error) {
	r := bytes.NewReader(stream)
	h, err := ReadSnapshotHeader(r)
	if err != nil {
		return h, nil, err
	}
	got := map[int64][]byte{}
	it := NewSegmentIterator(r, h)
	for {
		start, sr, ok, err := it.Next()
		if err != nil {
			return h, got, err
		}
		if !ok {
			break
		}
		b, err := io.ReadAll(sr)
		if err != nil {
			return h, got, err
		}
		got[start] = b
	}
	return h, got, it.Finish()
}

func TestSnapshotStreamRoundTrip(t *testing.T) {
	stream, want, data := streamFixture(t)
	h, got, err := readAll(stream)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(h, want) {
		t.Fatalf("header\n got %+v\nwant %+v", h, want)
	}
	if len(got) != 3 || len(got[8192]) != 1000 {
		t.Fatalf("segments: %d, last %d bytes", len(got), len(got[8192]))
	}
	for start, b := range got {
		if !bytes.Equal(b, data[start][:len(b)]) {
			t.Fatalf("segment %d differs", start)
		}
	}
}

func TestSnapshotStreamDetectsDamage(t *testing.T) {
	stream, _, _ := streamFixture(t)
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	for i := 0; i < 200; i++ {
		bad := bytes.Clone(stream)
		pos := r.IntN(len(bad))
		bad[pos] ^= byte(1 + r.IntN(255))
		if _, _, err := readAll(bad); err == nil {
			t.Fatalf("flip at %d/%d accepted", pos, len(bad))
		}
		cut := r.IntN(len(stream))
		if _, _, err := readAll(stream[:cut]); !errors.Is(err, ErrBadSnapshot) {
			t.Fatalf("truncation at %d/%d: err %v", cut, len(stream), err)
		}
	}
}

func TestSnapshotStreamSkippedSegmentsStillVerified(t *testing.T) {
	stream, _, _ := streamFixture(t)
	stream[len(stream)-10] ^= 0xff // inside the last segment's bytes / crc
	r := bytes.NewReader(stream)
	h, err := ReadSnapshotHeader(r)
	if err != nil {
		t.Fatal(err)
	}
	// A consumer that reads nothing: Finish must still find the damage.
	if err := NewSegmentIterator(r, h).Finish(); !errors.Is(err, ErrBadSnapshot) {
		t.Fatalf("Finish: %v", err)
	}
}
