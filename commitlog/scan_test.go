package commitlog

import (
	"bytes"
	"errors"
	"io"
	"math/rand"
	"testing"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/mmap"
	"github.com/raftmq/raftmq/vfs"
)

// checkScanAll scans from `from` and checks every entry against want, then a
// clean io.EOF.
func checkScanAll(t *testing.T, l *Log, from int64, want []written) {
	t.Helper()
	s := NewScanner(l, from)
	for _, w := range want {
		e, err := s.Next()
		if err != nil {
			t.Fatalf("entry %d at %d: %v", w.index, w.start, err)
		}
		checkEntry(t, &e, &w)
	}
	if _, err := s.Next(); err != io.EOF {
		t.Fatalf("after the last entry: %v", err)
	}
	if want := l.WriteOffset(); s.Pos() != want && !atSegmentEnd(l, s.Pos()) {
		t.Fatalf("scan ended at %d, write offset %d", s.Pos(), want)
	}
}

func atSegmentEnd(l *Log, pos int64) bool { return pos%l.FileSize() == 0 }

func checkEntry(t *testing.T, e *Entry, w *written) {
	t.Helper()
	if e.Start != w.start || e.End != w.start+w.size || e.Header.RaftIndex != w.index || e.Header.Kind != w.kind ||
		!bytes.Equal(e.Command, w.command) || int(e.Header.Count) != len(w.msgs) {
		t.Fatalf("entry %+v, want %+v", e.Header, w)
	}
	i := 0
	err := e.ForEachRecord(func(off int64, r message.Record) error {
		if off != w.pos[i].Offset || !bytes.Equal(r.Body, w.msgs[i].Body) || r.QueueOffset != w.qoffs[i] {
			t.Fatalf("record %d at %d differs", i, off)
		}
		i++
		return nil
	})
	if err != nil || i != len(w.msgs) {
		t.Fatalf("ForEachRecord: %d records, %v", i, err)
	}
}

// segmentOf returns the segment holding off.
func segmentOf(t testing.TB, l *Log, off int64) mmap.Segment {
	t.Helper()
	for _, s := range l.Segments() {
		if off >= s.Start && off < s.End() {
			return s
		}
	}
	t.Fatalf("no segment holds %d", off)
	return mmap.Segment{}
}

func TestScanEmptyAndCleanEnd(t *testing.T) {
	l := openTestLog(t, vfs.NewMem(), 64<<10)
	if _, err := NewScanner(l, 0).Next(); err != io.EOF {
		t.Fatalf("empty log: %v", err)
	}
	a := &appender{t: t, l: l, rng: rand.New(rand.NewSource(testSeed(t)))}
	a.appendRandom(20, 500)
	checkScanAll(t, l, 0, a.entries)
	// Starting from an entry boundary in the middle.
	checkScanAll(t, l, a.entries[7].start, a.entries[7:])
}

func TestScanTornTailEveryByte(t *testing.T) {
	rng := rand.New(rand.NewSource(testSeed(t)))
	l := openTestLog(t, vfs.NewMem(), 64<<10)
	a := &appender{t: t, l: l, rng: rng}
	a.appendRandom(5, 300)
	last := a.append(message.KindMessages, 3, 300)
	seg := segmentOf(t, l, last.start)
	tail := seg.File.Bytes()[last.start-seg.Start : last.start-seg.Start+last.size]
	saved := append([]byte(nil), tail...)
	for k := 0; k < len(tail); k++ {
		copy(tail, saved)
		clear(tail[k:])
		s := NewScanner(l, 0)
		for _, w := range a.entries[:len(a.entries)-1] {
			e, err := s.Next()
			if err != nil {
				t.Fatalf("k=%d: entry %d: %v", k, w.index, err)
			}
			checkEntry(t, &e, &w)
		}
		_, err := s.Next()
		// A prefix of zeros (TOTALSIZE's high bytes) is indistinguishable
		// from a clean end, and that is fine: both truncate here.
		clean := isZero(tail[:k])
		switch {
		case clean && err != io.EOF:
			t.Fatalf("k=%d: %v, want io.EOF", k, err)
		case !clean && !errors.Is(err, ErrTornTail):
			t.Fatalf("k=%d: %v, want ErrTornTail", k, err)
		case s.Pos() != last.start:
			t.Fatalf("k=%d: stopped at %d, want %d", k, s.Pos(), last.start)
		}
		if _, err2 := s.Next(); err2 != err {
			t.Fatalf("error not sticky: %v then %v", err, err2)
		}
	}
}

// corruptionAt scans l from 0 and expects a CorruptionError at off.
func corruptionAt(t *testing.T, l *Log, off int64, cause error) {
	t.Helper()
	s := NewScanner(l, 0)
	var err error
	for err == nil {
		_, err = s.Next()
	}
	var ce *CorruptionError
	if !errors.As(err, &ce) || !errors.Is(err, message.ErrCorrupt) {
		t.Fatalf("got %v, want a CorruptionError at %d", err, off)
	}
	if ce.Offset != off || ce.File != segmentOf(t, l, off).File.Name() || s.Pos() != off {
		t.Fatalf("corruption reported at %s:%d (pos %d), want %d", ce.File, ce.Offset, s.Pos(), off)
	}
	if cause != nil && !errors.Is(err, cause) {
		t.Fatalf("cause %v, want %v", err, cause)
	}
}

func TestScanMidFileCorruption(t *testing.T) {
	rng := rand.New(rand.NewSource(testSeed(t)))
	l := openTestLog(t, vfs.NewMem(), 16<<10)
	a := &appender{t: t, l: l, rng: rng}
	a.appendRandom(60, 400)
	for i := 0; i < 200; i++ {
		// Any bit of an earlier entry except its ENTRYSIZE (a flip there can
		// make the entry claim all later data: see Scanner).
		w := a.entries[rng.Intn(len(a.entries)-2)]
		bit := rng.Int63n(w.size * 8)
		if byteAt := bit / 8; byteAt >= message.FrameOffEntrySize && byteAt < message.FrameOffEntrySize+4 {
			continue
		}
		seg := segmentOf(t, l, w.start)
		b := seg.File.Bytes()[w.start-seg.Start+bit/8:]
		b[0] ^= 1 << (bit % 8)
		corruptionAt(t, l, w.start, nil)
		b[0] ^= 1 << (bit % 8)
	}
	checkScanAll(t, l, 0, a.entries)
}

func TestScanCorruptionBeforeLaterSegment(t *testing.T) {
	// The last entry of a segment is damaged and followed by zeros, but the
	// next segment holds data: not a torn tail.
	l := openTestLog(t, vfs.NewMem(), 8<<10)
	a := &appender{t: t, l: l, rng: rand.New(rand.NewSource(testSeed(t)))}
	a.appendRandom(60, 400)
	if len(l.Segments()) < 2 {
		t.Fatal("want two segments")
	}
	seg0 := l.Segments()[0]
	var victim written
	for _, w := range a.entries {
		if w.start+w.size <= seg0.End() {
			victim = w
		}
	}
	b := seg0.File.Bytes()[victim.start-seg0.Start:]
	b[victim.size-1] ^= 0x40                              // damage its last byte
	clear(b[victim.size : victim.size+message.BlankSize]) // and lose the blank behind it
	corruptionAt(t, l, victim.start, nil)
}

func TestScanPhysicalOffsetMismatch(t *testing.T) {
	l := openTestLog(t, vfs.NewMem(), 64<<10)
	a := &appender{t: t, l: l, rng: rand.New(rand.NewSource(testSeed(t)))}
	a.append(message.KindMessages, 2, 100)
	w := a.append(message.KindMessages, 2, 100)
	a.append(message.KindNoop, 0, 0)
	// Re-encode the middle entry as if it started 16 bytes later: its CRC
	// is valid, its records' PHYSICALOFFSETs are not.
	seg := segmentOf(t, l, w.start)
	buf := seg.File.Bytes()[w.start-seg.Start : w.start-seg.Start+w.size]
	h := EntryHeader{Kind: message.KindMessages, RaftIndex: w.index, Term: 1 + w.index/10, StoreTimestamp: 1700000000000 + int64(w.index), StoreHost: testHost}
	encodeEntry(buf, w.start+16, &h, nil, w.msgs, w.qoffs, nil)
	corruptionAt(t, l, w.start, message.ErrBadPosition)
}

func TestScanRaftIndexMustIncrease(t *testing.T) {
	l := openTestLog(t, vfs.NewMem(), 64<<10)
	h := EntryHeader{Kind: message.KindNoop, RaftIndex: 5, Term: 1}
	var starts []int64
	for _, idx := range []uint64{5, 5, 6} {
		h.RaftIndex = idx
		start, _, err := l.AppendEntry(h, nil, nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		starts = append(starts, start)
	}
	corruptionAt(t, l, starts[1], message.ErrBadFrame)
}

func TestScanZeroHoleIsNotAnEnd(t *testing.T) {
	l := openTestLog(t, vfs.NewMem(), 64<<10)
	a := &appender{t: t, l: l, rng: rand.New(rand.NewSource(testSeed(t)))}
	a.appendRandom(5, 200)
	w := a.entries[2]
	seg := segmentOf(t, l, w.start)
	clear(seg.File.Bytes()[w.start-seg.Start : w.start-seg.Start+w.size])
	corruptionAt(t, l, w.start, nil)
}

func TestScanBadBlank(t *testing.T) {
	l := openTestLog(t, vfs.NewMem(), 8<<10)
	a := &appender{t: t, l: l, rng: rand.New(rand.NewSource(testSeed(t)))}
	a.appendRandom(40, 400)
	seg0 := l.Segments()[0]
	blank := lastEntryIn(a.entries, seg0.Start, seg0.End())
	b := seg0.File.Bytes()[blank-seg0.Start:]
	be.PutUint32(b, uint32(len(b)-8))
	corruptionAt(t, l, blank, message.ErrBadSize)
}
