package commitlog

import (
	"errors"
	"fmt"
	"io"
	"math/rand"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/vfs"
)

// scanOutcome is everything a scan reports: each entry's position, header
// and the bytes it aliases, then the error it ended with and where.
type scanOutcome struct {
	entries []string
	err     error
	pos     int64
}

func openLogIn(t *testing.T, fs vfs.FS, dir string, fileSize int64) *Log {
	t.Helper()
	l, err := Open(fs, Config{Dir: filepath.Join(dir, "commitlog"), FileSize: fileSize})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func scanWith(l *Log, from int64, chunk int64, noPread bool) scanOutcome {
	s := NewScanner(l, from)
	s.win.size, s.win.noPread = chunk, noPread
	return outcomeOf(s)
}

// outcomeOf runs s to its end.
func outcomeOf(s *Scanner) scanOutcome {
	var o scanOutcome
	for {
		e, err := s.Next()
		if err != nil {
			o.err, o.pos = err, s.Pos()
			return o
		}
		o.entries = append(o.entries, fmt.Sprintf("[%d,%d) %+v command %x records %d bytes at %p",
			e.Start, e.End, e.Header, e.Command, len(e.Records), e.Records))
	}
}

func sameOutcome(t *testing.T, what string, got, want scanOutcome) {
	t.Helper()
	if len(got.entries) != len(want.entries) {
		t.Fatalf("%s: %d entries through chunks, %d through the mapping (errors %v / %v)",
			what, len(got.entries), len(want.entries), got.err, want.err)
	}
	for i := range got.entries {
		if got.entries[i] != want.entries[i] {
			t.Fatalf("%s: entry %d\n chunks:  %s\n mapping: %s", what, i, got.entries[i], want.entries[i])
		}
	}
	if got.err.Error() != want.err.Error() || got.pos != want.pos ||
		errors.Is(got.err, ErrTornTail) != errors.Is(want.err, ErrTornTail) ||
		errors.Is(got.err, message.ErrCorrupt) != errors.Is(want.err, message.ErrCorrupt) {
		t.Fatalf("%s: ended with %v at %d through chunks, %v at %d through the mapping", what, got.err, got.pos, want.err, want.pos)
	}
}

// TestScanThroughChunksMatchesMapping: on real files the scanner checks a
// copy read with pread in chunks. Whatever the log holds (entries larger
// than a chunk, entries across chunk boundaries, blanks at segment ends,
// flipped bytes, zeroed ranges, torn tails), a scan through chunks of any
// size reports exactly what a scan through the mapping reports, and its
// entries alias the mapping. The damage is done through the mapping, so
// this also checks that pread sees what the mapping holds.
func TestScanThroughChunksMatchesMapping(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	l := openLogIn(t, vfs.OS(), t.TempDir(), 128<<10)
	a := &appender{t: t, l: l, rng: rng}
	fillMixed(a, rng)
	chunks := []int64{512, 4 << 10, 64 << 10, 0}
	for round := 0; round < 300; round++ {
		kind := rng.Intn(4)
		w := a.entries[rng.Intn(len(a.entries))]
		if kind == 3 { // a torn tail: the last entry cut short
			w = a.entries[len(a.entries)-1]
		}
		seg := segmentOf(t, l, w.start)
		data := seg.File.Bytes()
		at := w.start - seg.Start + rng.Int63n(w.size)
		n := int64(1)
		what := fmt.Sprintf("seed %d round %d: ", seed, round)
		switch kind {
		case 0:
			n = 0
			what += "intact"
		case 1:
			what += fmt.Sprintf("byte %d flipped", seg.Start+at)
		case 2:
			n = min(int64(len(data))-at, 1+rng.Int63n(9000))
			what += fmt.Sprintf("[%d,%d) zeroed", seg.Start+at, seg.Start+at+n)
		case 3:
			n = int64(len(data)) - at
			what += fmt.Sprintf("torn from %d", seg.Start+at)
		}
		saved := append([]byte(nil), data[at:at+n]...)
		if n == 1 {
			data[at] ^= byte(1 + rng.Intn(255))
		} else {
			clear(data[at : at+n])
		}
		from := a.entries[rng.Intn(len(a.entries))].start
		if rng.Intn(2) == 0 {
			from = 0
		}
		want := scanWith(l, from, 0, true)
		for _, c := range chunks {
			sameOutcome(t, fmt.Sprintf("%s, from %d, chunk %d", what, from, c), scanWith(l, from, c, false), want)
		}
		copy(data[at:], saved)
	}
	checkScanAll(t, l, 0, a.entries)
}

// TestScanReadErrorIsNotDamage: a segment the file system cannot read
// stops the scan with ErrRead, which is neither a clean end, nor a torn
// tail, nor corruption: nothing may be cut on it.
func TestScanReadErrorIsNotDamage(t *testing.T) {
	var failReads atomic.Bool
	var failed atomic.Int64
	inj := vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind == vfs.OpRead && failReads.Load() {
			failed.Add(1)
			return fmt.Errorf("%w: EIO reading %s", vfs.ErrInjected, filepath.Base(op.Path))
		}
		return nil
	})
	l := openLogIn(t, vfs.WithInjector(vfs.OS(), inj), t.TempDir(), 64<<10)
	a := &appender{t: t, l: l, rng: rand.New(rand.NewSource(testSeed(t)))}
	a.appendRandom(40, 3000)
	checkScanAll(t, l, 0, a.entries)

	failReads.Store(true)
	s := NewScanner(l, 0)
	_, err := s.Next()
	if !errors.Is(err, ErrRead) || !errors.Is(err, vfs.ErrInjected) || failed.Load() == 0 {
		t.Fatalf("scan with failing reads: %v (%d reads failed), want ErrRead", err, failed.Load())
	}
	if errors.Is(err, io.EOF) || errors.Is(err, ErrTornTail) || errors.Is(err, message.ErrCorrupt) || s.Pos() != 0 {
		t.Fatalf("a read error classified as damage: %v at %d", err, s.Pos())
	}
	failReads.Store(false)
	checkScanAll(t, l, 0, a.entries)
}
