package commitlog

import (
	"errors"
	"flag"
	"io"
	"math/rand"
	"slices"
	"testing"

	"github.com/raftmq/raftmq/internal/testseed"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/vfs"
)

var genCorpus = flag.Bool("gencorpus", false, "rewrite the seed corpora in testdata/fuzz")

const fuzzSegment = 4 << 10

// FuzzScanner treats the input as the content of the only segment, scanned
// in full and sparse (with a chunk small enough that records can be read
// at head and tail only). Neither crashes, both report only the documented
// ends, and the sparse scan accepts every entry the full scan accepts.
func FuzzScanner(f *testing.F) {
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		l := openTestLog(t, vfs.NewMem(), fuzzSegment)
		if _, _, err := l.AppendEntry(EntryHeader{Kind: message.KindNoop, RaftIndex: 1}, nil, nil, nil, nil); err != nil {
			t.Fatal(err)
		}
		seg := l.Segments()[0]
		clear(seg.File.Bytes())
		copy(seg.File.Bytes(), data)
		full := fuzzScan(t, NewScanner(l, 0))
		sparse := NewScanner(l, 0)
		sparse.win.size = 256
		sparse.Sparse()
		if got := fuzzScan(t, sparse); len(got) < len(full) || !slices.Equal(got[:len(full)], full) {
			t.Fatalf("sparse scan's entries end at %v, the full scan's at %v", got, full)
		}
	})
}

// fuzzScan runs s to its end, checks each entry and the end, and returns
// the entries' ends.
func fuzzScan(t *testing.T, s *Scanner) []int64 {
	var ends []int64
	prev := int64(0)
	for {
		e, err := s.Next()
		if err != nil {
			var ce *CorruptionError
			if err != io.EOF && !errors.Is(err, ErrTornTail) && !errors.As(err, &ce) {
				t.Fatalf("unexpected error %v", err)
			}
			return ends
		}
		if e.Start != prev || e.End <= e.Start || e.End+message.BlankSize > fuzzSegment {
			t.Fatalf("entry [%d,%d) after %d", e.Start, e.End, prev)
		}
		n := 0
		if err := e.ForEachRecord(func(int64, message.Record) error { n++; return nil }); err != nil || n != int(e.Header.Count) {
			t.Fatalf("records of a verified entry: %d, %v", n, err)
		}
		prev = e.End
		ends = append(ends, e.End)
	}
}

// TestGenerateFuzzCorpus rewrites testdata/fuzz with -gencorpus.
func TestGenerateFuzzCorpus(t *testing.T) {
	if !*genCorpus {
		t.Skip("run with -gencorpus to rewrite the seed corpora")
	}
	rng := rand.New(rand.NewSource(1))
	l := openTestLog(t, vfs.NewMem(), fuzzSegment)
	a := &appender{t: t, l: l, rng: rng}
	a.append(message.KindMessages, 2, 60)
	a.append(message.KindCommand, 0, 0)
	a.append(message.KindNoop, 0, 0)
	a.append(message.KindMessages, 1, 60)
	if len(l.Segments()) != 1 {
		t.Fatal("seed log must fit one segment")
	}
	seg := l.Segments()[0]
	data := seg.File.Bytes()[:l.WriteOffset()]
	testseed.WriteFuzzSeed(t, "FuzzScanner", 0, data)
	testseed.WriteFuzzSeed(t, "FuzzScanner", 1, data[:len(data)-30])
	full := openTestLog(t, vfs.NewMem(), fuzzSegment)
	b := &appender{t: t, l: full, rng: rng}
	b.appendRandom(30, 150) // rolls: the first segment ends with a blank
	testseed.WriteFuzzSeed(t, "FuzzScanner", 2, full.Segments()[0].File.Bytes())
}
