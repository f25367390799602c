package commitlog

import (
	"bytes"
	"errors"
	"io"
	"math/rand"
	"runtime"
	"testing"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/vfs"
)

var testHost = message.HostPort{IP: [4]byte{10, 1, 2, 3}, Port: 10911}

func openTestLog(t testing.TB, fs vfs.FS, fileSize int64) *Log {
	t.Helper()
	l, err := Open(fs, Config{Dir: "/data/commitlog", FileSize: fileSize})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// written is what a test appended: one entry and its messages.
type written struct {
	start   int64
	size    int64
	index   uint64
	kind    message.Kind
	command []byte
	msgs    []message.Message
	qoffs   []int64
	pos     []RecordPos
}

// appender appends random entries and remembers them.
type appender struct {
	t       testing.TB
	l       *Log
	rng     *rand.Rand
	index   uint64
	qoff    int64
	entries []written
}

func (a *appender) append(kind message.Kind, nmsgs int, maxBody int) written {
	a.t.Helper()
	a.index++
	w := written{index: a.index, kind: kind}
	switch kind {
	case message.KindMessages:
		for i := 0; i < nmsgs; i++ {
			m := randMessage(a.rng)
			m.Body = m.Body[:min(len(m.Body), maxBody)]
			w.msgs = append(w.msgs, m)
			w.qoffs = append(w.qoffs, a.qoff)
			a.qoff++
		}
	case message.KindCommand:
		w.command = make([]byte, 1+a.rng.Intn(100))
		a.rng.Read(w.command)
	}
	h := EntryHeader{Kind: kind, RaftIndex: a.index, Term: 1 + a.index/10, StoreTimestamp: 1700000000000 + int64(a.index), StoreHost: testHost}
	start, pos, err := a.l.AppendEntry(h, w.command, w.msgs, w.qoffs, nil)
	if err != nil {
		a.t.Fatalf("append %d: %v", a.index, err)
	}
	w.start, w.pos, w.size = start, pos, EntrySize(w.command, w.msgs)
	a.entries = append(a.entries, w)
	return w
}

func (a *appender) appendRandom(n int, maxBody int) {
	for i := 0; i < n; i++ {
		switch r := a.rng.Intn(10); {
		case r == 0:
			a.append(message.KindCommand, 0, 0)
		case r == 1:
			a.append(message.KindNoop, 0, 0)
		default:
			a.append(message.KindMessages, 1+a.rng.Intn(8), maxBody)
		}
	}
}

func TestAppendAndRead(t *testing.T) {
	rng := rand.New(rand.NewSource(testSeed(t)))
	l := openTestLog(t, vfs.NewMem(), 1<<20)
	a := &appender{t: t, l: l, rng: rng}
	a.appendRandom(50, 2048)
	var end int64
	for _, w := range a.entries {
		if w.start < end {
			t.Fatalf("entry %d at %d overlaps the previous end %d", w.index, w.start, end)
		}
		end = w.start + w.size
		for i, p := range w.pos {
			r, err := l.ReadRecord(p.Offset)
			if err != nil {
				t.Fatalf("read %d: %v", p.Offset, err)
			}
			m := w.msgs[i]
			if r.Size != p.Size || r.PhysicalOffset != p.Offset || r.QueueOffset != w.qoffs[i] ||
				!bytes.Equal(r.Body, m.Body) || string(r.Topic) != m.Topic || r.StoreHost != testHost ||
				r.StoreTimestamp != 1700000000000+int64(w.index) {
				t.Fatalf("record at %d: %+v", p.Offset, r)
			}
			ts, err := l.StoreTimestampAt(p.Offset)
			if err != nil || ts != r.StoreTimestamp {
				t.Fatalf("StoreTimestampAt: %d %v", ts, err)
			}
			raw, err := l.ReadAt(p.Offset, p.Size)
			if err != nil || len(raw) != int(p.Size) || be.Uint32(raw[message.OffMagic:]) != message.MagicMessageV1 {
				t.Fatalf("ReadAt: %v", err)
			}
		}
		if _, err := l.ReadRecord(w.start); !errors.Is(err, ErrNotRecord) {
			t.Fatalf("ReadRecord at a frame: %v", err)
		}
	}
	if l.WriteOffset() != end {
		t.Fatalf("write offset %d, want %d", l.WriteOffset(), end)
	}
	if _, err := l.ReadRecord(end); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("read at the write offset: %v", err)
	}
	if _, err := l.ReadAt(end-8, 16); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("read across the write offset: %v", err)
	}
}

func TestAppendRejects(t *testing.T) {
	l := openTestLog(t, vfs.NewMem(), 64<<10)
	good := []message.Message{{Topic: "t", Body: []byte("x")}}
	big := []message.Message{{Topic: "t", Body: make([]byte, 64<<10)}}
	h := func(k message.Kind) EntryHeader { return EntryHeader{Kind: k, RaftIndex: 1, Term: 1} }
	cases := []struct {
		name string
		h    EntryHeader
		cmd  []byte
		msgs []message.Message
		q    []int64
		want error
	}{
		{"kind 0", h(0), nil, nil, nil, ErrBadEntry},
		{"command in messages", h(message.KindMessages), []byte("c"), good, []int64{0}, ErrBadEntry},
		{"messages in command", h(message.KindCommand), []byte("c"), good, []int64{0}, ErrBadEntry},
		{"messages in noop", h(message.KindNoop), nil, good, []int64{0}, ErrBadEntry},
		{"queue offsets", h(message.KindMessages), nil, good, nil, ErrBadEntry},
		{"too large", h(message.KindMessages), nil, big, []int64{0}, ErrEntryTooLarge},
		{"bad topic", h(message.KindMessages), nil, []message.Message{{Body: []byte("x")}}, []int64{0}, message.ErrBadTopic},
	}
	for _, c := range cases {
		if _, _, err := l.AppendEntry(c.h, c.cmd, c.msgs, c.q, nil); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v want %v", c.name, err, c.want)
		}
	}
	if l.WriteOffset() != 0 || len(l.Segments()) != 0 {
		t.Fatalf("rejected entries changed the log: write offset %d, %d segments", l.WriteOffset(), len(l.Segments()))
	}
	// The largest entry that fits (with its blank) is accepted.
	fit := []message.Message{{Topic: "t", Body: make([]byte, 64<<10-message.BlankSize-message.FrameSize-message.RecordFixedSize-1)}}
	if _, _, err := l.AppendEntry(h(message.KindMessages), nil, fit, []int64{0}, nil); err != nil {
		t.Fatal(err)
	}
}

func TestBlankAndRoll(t *testing.T) {
	rng := rand.New(rand.NewSource(testSeed(t)))
	const fileSize = 8 << 10
	l := openTestLog(t, vfs.NewMem(), fileSize)
	a := &appender{t: t, l: l, rng: rng}
	a.appendRandom(200, 600)
	segs := l.Segments()
	if len(segs) < 4 {
		t.Fatalf("%d segments, want several", len(segs))
	}
	for _, w := range a.entries {
		if w.start/fileSize != (w.start+w.size+message.BlankSize-1)/fileSize {
			t.Fatalf("entry %d [%d,%d) leaves no room for a blank in its segment", w.index, w.start, w.start+w.size)
		}
	}
	// Every full segment ends with a blank reaching exactly its end.
	for i, seg := range segs[:len(segs)-1] {
		last := lastEntryIn(a.entries, seg.Start, seg.End())
		b := seg.File.Bytes()[last-seg.Start:]
		if be.Uint32(b[message.OffMagic:]) != message.MagicBlank || int(be.Uint32(b)) != len(b) {
			t.Fatalf("segment %d: no blank at %d", i, last)
		}
	}
	checkScanAll(t, l, 0, a.entries)
}

// lastEntryIn returns the end of the last entry in [start, end).
func lastEntryIn(entries []written, start, end int64) int64 {
	last := start
	for _, w := range entries {
		if w.start >= start && w.start < end {
			last = w.start + w.size
		}
	}
	return last
}

func TestReopenScanTruncateAppend(t *testing.T) {
	fs := vfs.NewMem()
	rng := rand.New(rand.NewSource(testSeed(t)))
	l, err := Open(fs, Config{Dir: "/cl", FileSize: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	a := &appender{t: t, l: l, rng: rng}
	a.appendRandom(30, 300)
	if err := l.Flush(l.WriteOffset()); err != nil {
		t.Fatal(err)
	}
	if l.FlushedOffset() != l.WriteOffset() {
		t.Fatalf("flushed %d, written %d", l.FlushedOffset(), l.WriteOffset())
	}
	end := l.WriteOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if l, err = Open(fs, Config{Dir: "/cl", FileSize: 8 << 10}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	s := NewScanner(l, 0)
	var err2 error
	for err2 == nil {
		_, err2 = s.Next()
	}
	if err2 != io.EOF || s.Pos() != end {
		t.Fatalf("scan after reopen: %v at %d, want EOF at %d", err2, s.Pos(), end)
	}
	if err := l.TruncateDirty(s.Pos()); err != nil {
		t.Fatal(err)
	}
	a.l = l
	a.appendRandom(10, 300)
	checkScanAll(t, l, 0, a.entries)
}

// TestReadsConcurrentWithAppend follows the write offset from another
// goroutine and verifies every published entry (run with -race).
func TestReadsConcurrentWithAppend(t *testing.T) {
	const fileSize = 16 << 10
	l := openTestLog(t, vfs.NewMem(), fileSize)
	a := &appender{t: t, l: l, rng: rand.New(rand.NewSource(testSeed(t)))}
	a.append(message.KindNoop, 0, 0)
	done := make(chan int64)
	errc := make(chan error, 1)
	go func() { errc <- followLog(l, done) }()
	a.appendRandom(300, 400)
	done <- l.WriteOffset()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// followLog verifies entries as the write offset publishes them, until it
// has reached the offset sent on done.
func followLog(l *Log, done chan int64) error {
	pos, final := int64(0), int64(-1)
	for final < 0 || pos < final {
		select {
		case final = <-done:
		default:
		}
		if pos >= l.WriteOffset() {
			runtime.Gosched()
			continue
		}
		hdr, err := l.ReadAt(pos, message.BlankSize)
		if err != nil {
			return err
		}
		if be.Uint32(hdr[message.OffMagic:]) == message.MagicBlank {
			pos += int64(be.Uint32(hdr))
			continue
		}
		fb, err := l.ReadAt(pos, message.FrameSize)
		if err != nil {
			return err
		}
		h, err := message.DecodeFrame(fb)
		if err != nil {
			return err
		}
		entry, err := l.ReadAt(pos, h.EntrySize)
		if err != nil {
			return err
		}
		if message.EntryCRC(entry) != h.CRC {
			return message.ErrEntryCRC
		}
		pos += int64(h.EntrySize)
	}
	return nil
}

// TouchAhead covers the bytes from the write offset to n past it once,
// stays within the write offset's segment, and starts again below a
// truncation.
func TestTouchAhead(t *testing.T) {
	const seg, ahead = 1 << 20, 64 << 10
	rng := rand.New(rand.NewSource(testSeed(t)))
	l := openTestLog(t, vfs.NewMem(), seg)
	if n := l.TouchAhead(ahead); n != 0 {
		t.Fatalf("a log without segments: touched %d bytes", n)
	}
	a := &appender{t: t, l: l, rng: rng}
	a.append(message.KindMessages, 3, 512)
	wo := l.WriteOffset()
	if n := l.TouchAhead(ahead); n != ahead {
		t.Fatalf("first call touched %d bytes, want %d", n, ahead)
	}
	if n := l.TouchAhead(ahead); n != 0 {
		t.Fatalf("second call touched %d bytes again", n)
	}
	a.append(message.KindMessages, 3, 512)
	if n, moved := l.TouchAhead(ahead), l.WriteOffset()-wo; n != moved {
		t.Fatalf("after the write offset moved %d bytes, touched %d", moved, n)
	}
	if n, rest := l.TouchAhead(10*seg), seg-(l.WriteOffset()+ahead); n != rest {
		t.Fatalf("touched %d bytes up to the segment's end, want %d", n, rest)
	}
	if err := l.TruncateDirty(wo); err != nil {
		t.Fatal(err)
	}
	if n := l.TouchAhead(ahead); n != ahead {
		t.Fatalf("after truncating to %d: touched %d bytes, want %d", wo, n, ahead)
	}
}
