package commitlog

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/raftmq/raftmq/vfs"
)

var genCorpus = flag.Bool("gencorpus", false, "rewrite the seed corpora in testdata/fuzz")

func FuzzDecodeRecord(f *testing.F) {
	f.Add(goldenRecord(f))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeRecord(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not match ErrCorrupt", err)
			}
			return
		}
		// A record that decodes re-encodes to the same bytes.
		m := Message{Topic: string(r.Topic), QueueID: r.QueueID, Flag: r.Flag, SysFlag: r.SysFlag,
			BornTimestamp: r.BornTimestamp, BornHost: r.BornHost, ReconsumeTimes: r.ReconsumeTimes,
			PreparedTxOffset: r.PreparedTxOffset, Body: r.Body, Properties: r.Properties}
		buf := make([]byte, r.Size)
		n, err := EncodeRecord(buf, &m, StoreFields{QueueOffset: r.QueueOffset, PhysicalOffset: r.PhysicalOffset,
			StoreTimestamp: r.StoreTimestamp, StoreHost: r.StoreHost})
		if err != nil || n != int(r.Size) || !bytes.Equal(buf, data[:r.Size]) {
			t.Fatalf("re-encode: %d %v\n%x\n%x", n, err, buf, data[:r.Size])
		}
	})
}

func FuzzDecodeFrame(f *testing.F) {
	f.Add(goldenFrame(f, "8A3C9CA4"))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := DecodeFrame(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not match ErrCorrupt", err)
			}
			return
		}
		buf := make([]byte, FrameSize)
		if err := EncodeFrame(buf, h); err != nil || !bytes.Equal(buf, data[:FrameSize]) {
			t.Fatalf("re-encode: %v\n%x\n%x", err, buf, data[:FrameSize])
		}
	})
}

const fuzzSegment = 4 << 10

// FuzzScanner treats the input as the content of the only segment.
func FuzzScanner(f *testing.F) {
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		l := openTestLog(t, vfs.NewMem(), fuzzSegment)
		if _, _, err := l.AppendEntry(EntryHeader{Kind: KindNoop, RaftIndex: 1}, nil, nil, nil, nil); err != nil {
			t.Fatal(err)
		}
		seg := l.Segments()[0]
		clear(seg.File.Bytes())
		copy(seg.File.Bytes(), data)
		s := NewScanner(l, 0)
		prev := int64(0)
		for {
			e, err := s.Next()
			if err != nil {
				var ce *CorruptionError
				if err != io.EOF && !errors.Is(err, ErrTornTail) && !errors.As(err, &ce) {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if e.Start != prev || e.End <= e.Start || e.End+BlankSize > fuzzSegment {
				t.Fatalf("entry [%d,%d) after %d", e.Start, e.End, prev)
			}
			n := 0
			if err := e.ForEachRecord(func(int64, Record) error { n++; return nil }); err != nil || n != int(e.Header.Count) {
				t.Fatalf("records of a verified entry: %d, %v", n, err)
			}
			prev = e.End
		}
	})
}

// TestGenerateFuzzCorpus rewrites testdata/fuzz with -gencorpus.
func TestGenerateFuzzCorpus(t *testing.T) {
	if !*genCorpus {
		t.Skip("run with -gencorpus to rewrite the seed corpora")
	}
	rng := rand.New(rand.NewSource(1))
	rec := make([]byte, 4096)
	for i := 0; i < 4; i++ {
		m := randMessage(rng)
		m.Body = m.Body[:min(len(m.Body), 200)]
		n, err := EncodeRecord(rec, &m, StoreFields{PhysicalOffset: int64(i) * 1000})
		if err != nil {
			t.Fatal(err)
		}
		writeSeed(t, "FuzzDecodeRecord", i, rec[:n])
		writeSeed(t, "FuzzDecodeRecord", 10+i, rec[:n-1-i])
	}
	l := openTestLog(t, vfs.NewMem(), fuzzSegment)
	a := &appender{t: t, l: l, rng: rng}
	a.append(KindMessages, 2, 60)
	a.append(KindCommand, 0, 0)
	a.append(KindNoop, 0, 0)
	a.append(KindMessages, 1, 60)
	if len(l.Segments()) != 1 {
		t.Fatal("seed log must fit one segment")
	}
	seg := l.Segments()[0]
	data := seg.File.Bytes()[:l.WriteOffset()]
	writeSeed(t, "FuzzScanner", 0, data)
	writeSeed(t, "FuzzScanner", 1, data[:len(data)-30])
	writeSeed(t, "FuzzDecodeFrame", 0, data[:FrameSize])
	for _, w := range a.entries[1:4] {
		writeSeed(t, "FuzzDecodeFrame", int(w.index), data[w.start:w.start+FrameSize])
	}
	full := openTestLog(t, vfs.NewMem(), fuzzSegment)
	b := &appender{t: t, l: full, rng: rng}
	b.appendRandom(30, 150) // rolls: the first segment ends with a blank
	writeSeed(t, "FuzzScanner", 2, full.Segments()[0].File.Bytes())
}

func writeSeed(t *testing.T, target string, n int, data []byte) {
	dir := filepath.Join("testdata", "fuzz", target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed%02d", n)), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
