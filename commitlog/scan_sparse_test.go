package commitlog

import (
	"errors"
	"fmt"
	"io"
	"math/rand"
	"sync/atomic"
	"testing"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/vfs"
)

func sparseScanWith(l *Log, from int64, chunk int64, noPread bool) scanOutcome {
	s := NewScanner(l, from)
	s.win.size, s.win.noPread = chunk, noPread
	s.Sparse()
	return outcomeOf(s)
}

// fillMixed appends entries to l until it has four segments: records
// smaller and larger than the small chunks, commands, no-ops, blanks at
// segment ends.
func fillMixed(a *appender, rng *rand.Rand) {
	for len(a.l.Segments()) < 4 {
		a.appendRandom(1, 1+rng.Intn(4000))
		if rng.Intn(8) == 0 {
			a.append(message.KindMessages, 10+rng.Intn(20), 3000) // larger than the smaller chunks
		}
	}
}

// TestScanSparseMatchesFullScan: on an intact log, whatever it holds, a
// sparse scan returns exactly the entries a full scan returns, aliasing the
// mapping at the same offsets, through chunks of any size and through the
// mapping, from any entry boundary.
func TestScanSparseMatchesFullScan(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	l := openLogIn(t, vfs.OS(), t.TempDir(), 128<<10)
	a := &appender{t: t, l: l, rng: rng}
	fillMixed(a, rng)
	for round := 0; round < 20; round++ {
		from := a.entries[rng.Intn(len(a.entries))].start
		want := scanWith(l, from, 0, true)
		if want.err != io.EOF {
			t.Fatalf("seed %d: the full scan from %d ended with %v", seed, from, want.err)
		}
		for _, c := range []int64{512, 4 << 10, 64 << 10, 0} {
			what := fmt.Sprintf("seed %d, sparse from %d, chunk %d", seed, from, c)
			sameOutcome(t, what, sparseScanWith(l, from, c, false), want)
			sameOutcome(t, what+" through the mapping", sparseScanWith(l, from, c, true), want)
		}
	}
}

// TestScanSparseChecksStructure: a sparse scan still refuses a record
// whose head or tail is wrong (position, TOTALSIZE, the lengths in its
// tail), reporting corruption where the full scan does; damage inside a
// body larger than a chunk, which only the entry CRC catches, passes it
// (the full scan refuses it).
func TestScanSparseChecksStructure(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	const chunk = 512
	l := openLogIn(t, vfs.OS(), t.TempDir(), 128<<10)
	a := &appender{t: t, l: l, rng: rng}
	fillMixed(a, rng)
	type victim struct {
		w   written
		rec int
	}
	var large []victim // records larger than a chunk, not in the last entry
	for _, w := range a.entries[:len(a.entries)-1] {
		for i, p := range w.pos {
			if p.Size > chunk && len(w.msgs[i].Body) > 0 {
				large = append(large, victim{w, i})
			}
		}
	}
	if len(large) < 10 {
		t.Fatalf("seed %d: %d records larger than a chunk", seed, len(large))
	}
	intact := scanWith(l, 0, chunk, false)
	for round := 0; round < 200; round++ {
		v := large[rng.Intn(len(large))]
		p := v.w.pos[v.rec]
		seg := segmentOf(t, l, p.Offset)
		rec := seg.File.Bytes()[p.Offset-seg.Start : p.Offset-seg.Start+int64(p.Size)]
		body := len(v.w.msgs[v.rec].Body)
		var at int
		var cause error
		switch rng.Intn(4) {
		case 0: // inside the body, away from the chunks the head and tail sit in
			at = message.OffBody + rng.Intn(body)
		case 1:
			at, cause = message.OffPhysicalOffset+rng.Intn(8), message.ErrBadPosition
		case 2:
			at, cause = message.OffTotalSize+3, message.ErrCorrupt
		case 3: // the PROPERTIESLENGTH, the last two bytes before the properties
			props := len(v.w.msgs[v.rec].Properties)
			at, cause = len(rec)-props-2+rng.Intn(2), message.ErrBadLength
		}
		what := fmt.Sprintf("seed %d round %d: byte %d of the record at %d (entry at %d)", seed, round, at, p.Offset, v.w.start)
		saved := rec[at]
		rec[at] ^= byte(1 + rng.Intn(255))
		got := sparseScanWith(l, 0, chunk, false)
		full := scanWith(l, 0, chunk, false)
		rec[at] = saved
		var ce *CorruptionError
		if cause == nil {
			sameOutcome(t, what+" (in the body)", got, intact)
			if !errors.As(full.err, &ce) || full.pos != v.w.start {
				t.Fatalf("%s: the full scan ended with %v at %d, want the entry's corruption", what, full.err, full.pos)
			}
			continue
		}
		if !errors.As(got.err, &ce) || !errors.Is(got.err, cause) || got.pos != v.w.start {
			t.Fatalf("%s: the sparse scan ended with %v at %d, want %v at %d", what, got.err, got.pos, cause, v.w.start)
		}
	}
	sameOutcome(t, "restored", sparseScanWith(l, 0, chunk, false), intact)
}

// TestScanSparseReadsHeadsAndTails: records larger than a chunk cost a
// sparse scan a few hundred bytes each; the full scan reads every byte.
func TestScanSparseReadsHeadsAndTails(t *testing.T) {
	var reading atomic.Bool
	var read atomic.Int64
	count := vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind == vfs.OpRead && reading.Load() {
			read.Add(int64(op.Length))
		}
		return nil
	})
	rng := rand.New(rand.NewSource(testSeed(t)))
	l := openLogIn(t, vfs.WithInjector(vfs.OS(), count), t.TempDir(), 4<<20)
	a := &appender{t: t, l: l, rng: rng}
	var total int64
	for i := 0; i < 24; i++ {
		a.index++
		m := randMessage(rng)
		m.Body = randBytes(rng, chunkSize+rng.Intn(chunkSize))
		h := EntryHeader{Kind: message.KindMessages, RaftIndex: a.index, Term: 1, StoreTimestamp: 1700000000000, StoreHost: testHost}
		if _, _, err := l.AppendEntry(h, nil, []message.Message{m}, []int64{int64(i)}, nil); err != nil {
			t.Fatal(err)
		}
		total += EntrySize(nil, []message.Message{m})
	}
	measure := func(scan func() scanOutcome) (scanOutcome, int64) {
		read.Store(0)
		reading.Store(true)
		defer reading.Store(false)
		return scan(), read.Load()
	}
	full, fullRead := measure(func() scanOutcome { return scanWith(l, 0, 0, false) })
	sparse, sparseRead := measure(func() scanOutcome { return sparseScanWith(l, 0, 0, false) })
	sameOutcome(t, "sparse", sparse, full)
	if len(full.entries) != 24 || full.err != io.EOF {
		t.Fatalf("full scan: %d entries, %v", len(full.entries), full.err)
	}
	if fullRead < total || sparseRead > 24*1024 {
		t.Fatalf("read %d bytes in the full scan, %d in the sparse scan, of %d bytes of entries", fullRead, sparseRead, total)
	}
	t.Logf("read %d bytes in the full scan, %d in the sparse scan, of %d bytes of entries", fullRead, sparseRead, total)
}

// TestScanSparseBoundsClaimedSize: a record whose TOTALSIZE claims more than
// any record may hold, inside an entry large enough to contain the claim,
// is reported as corruption (ErrBadSize) without a buffer of the claimed
// size.
func TestScanSparseBoundsClaimedSize(t *testing.T) {
	rng := rand.New(rand.NewSource(testSeed(t)))
	l := openLogIn(t, vfs.OS(), t.TempDir(), 16<<20)
	msgs := make([]message.Message, 3)
	for i := range msgs {
		msgs[i] = randMessage(rng)
		msgs[i].Body = randBytes(rng, 2<<20)
	}
	h := EntryHeader{Kind: message.KindMessages, RaftIndex: 1, Term: 1, StoreTimestamp: 1700000000000, StoreHost: testHost}
	start, pos, err := l.AppendEntry(h, nil, msgs, []int64{0, 1, 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Something after it: damage, not a torn tail.
	if _, _, err := l.AppendEntry(EntryHeader{Kind: message.KindNoop, RaftIndex: 2, Term: 1}, nil, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if size := EntrySize(nil, msgs); size <= message.MaxRecordSize {
		t.Fatalf("entry of %d bytes, want more than MaxRecordSize %d", size, message.MaxRecordSize)
	}
	seg := segmentOf(t, l, pos[0].Offset)
	be.PutUint32(seg.File.Bytes()[pos[0].Offset-seg.Start+message.OffTotalSize:], uint32(message.MaxRecordSize+1))
	s := NewScanner(l, 0)
	s.Sparse()
	_, err = s.Next()
	var ce *CorruptionError
	if !errors.As(err, &ce) || !errors.Is(err, message.ErrBadSize) || s.Pos() != start {
		t.Fatalf("got %v at %d, want ErrBadSize corruption at %d", err, s.Pos(), start)
	}
	if cap(s.scratch) > message.MaxRecordSize {
		t.Fatalf("scratch of %d bytes for a claimed size over MaxRecordSize", cap(s.scratch))
	}
}
