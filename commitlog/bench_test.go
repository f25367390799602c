package commitlog

import (
	"bytes"
	"hash/crc32"
	"path/filepath"
	"testing"
	"time"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/mmap"
	"github.com/raftmq/raftmq/vfs"
)

// Benchmarks of the append and scan paths, each beside its physical
// baseline in the same run:
//
//	go test ./commitlog -run XXX -bench . -benchtime 2s
//
// Append vs MemcpyBaseline: 64 messages of 1 KiB per entry into a warm
// 256 MiB segment on the OS file system, against a bare copy of the same
// bytes into the same kind of mapping. Scan vs ScanCRCBaseline: the
// verifying scanner against one CRC32C pass over the same bytes.

const (
	benchSegment  = 256 << 20
	benchMsgs     = 64
	benchBodySize = 1 << 10
)

func benchMessages() ([]message.Message, []int64) {
	msgs := make([]message.Message, benchMsgs)
	qoffs := make([]int64, benchMsgs)
	props, _ := message.EncodeProperties(message.Property{Key: message.PropertyTags, Value: "TagA"}, message.Property{Key: message.PropertyKeys, Value: "order-1"},
		message.Property{Key: message.PropertyUniqKey, Value: "7F0000010B5C18B4AAC2470E0B820000"})
	for i := range msgs {
		body := make([]byte, benchBodySize)
		for j := range body {
			body[j] = byte(i*7 + j)
		}
		msgs[i] = message.Message{Topic: "BenchTopic", QueueID: int32(i % 8), BornTimestamp: 1700000000000,
			BornHost: testHost, Body: body, Properties: props}
		qoffs[i] = int64(i)
	}
	return msgs, qoffs
}

func benchLog(b *testing.B) *Log {
	b.Helper()
	l, err := Open(vfs.OS(), Config{Dir: filepath.Join(b.TempDir(), "commitlog"), FileSize: benchSegment, PreTouch: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
	return l
}

func reportMsgs(b *testing.B, start time.Time) {
	b.ReportMetric(float64(b.N*benchMsgs)/time.Since(start).Seconds(), "msgs/s")
}

func BenchmarkAppend(b *testing.B) {
	l := benchLog(b)
	msgs, qoffs := benchMessages()
	size := EntrySize(nil, msgs)
	h := EntryHeader{Kind: message.KindMessages, Term: 1, StoreTimestamp: 1700000000000, StoreHost: testHost}
	out := make([]RecordPos, 0, benchMsgs)
	appendOne := func() {
		if l.WriteOffset()+size+message.BlankSize > benchSegment {
			l.q.SetWriteOffset(0) // rewrite the same warm pages; no roll
		}
		h.RaftIndex++
		var err error
		if _, out, err = l.AppendEntry(h, nil, msgs, qoffs, out[:0]); err != nil {
			b.Fatal(err)
		}
	}
	for l.WriteOffset()+size+message.BlankSize <= benchSegment { // warm every page once
		appendOne()
	}
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		appendOne()
	}
	reportMsgs(b, start)
}

func BenchmarkMemcpyBaseline(b *testing.B) {
	f, err := mmap.Open(vfs.OS(), filepath.Join(b.TempDir(), "baseline"), benchSegment, mmap.Options{PreTouch: true})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	msgs, qoffs := benchMessages()
	src := make([]byte, EntrySize(nil, msgs))
	h := EntryHeader{Kind: message.KindMessages, RaftIndex: 1, Term: 1, StoreTimestamp: 1700000000000, StoreHost: testHost}
	encodeEntry(src, 0, &h, nil, msgs, qoffs, nil)
	dst := f.Bytes()
	var pos int
	copyOne := func() {
		if pos+len(src)+message.BlankSize > len(dst) {
			pos = 0
		}
		pos += copy(dst[pos:], src)
	}
	for i := 0; i < benchSegment/len(src); i++ {
		copyOne()
	}
	b.SetBytes(int64(len(src)))
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		copyOne()
	}
	reportMsgs(b, start)
}

const benchScanBytes = 64 << 20

// scanLog fills a log with about benchScanBytes of 64 x 1 KiB entries.
func scanLog(b *testing.B) *Log {
	l := benchLog(b)
	msgs, qoffs := benchMessages()
	h := EntryHeader{Kind: message.KindMessages, Term: 1, StoreTimestamp: 1700000000000, StoreHost: testHost}
	for l.WriteOffset() < benchScanBytes {
		h.RaftIndex++
		if _, _, err := l.AppendEntry(h, nil, msgs, qoffs, nil); err != nil {
			b.Fatal(err)
		}
	}
	return l
}

func BenchmarkScan(b *testing.B) {
	l := scanLog(b)
	end := l.WriteOffset()
	b.SetBytes(end)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := NewScanner(l, 0)
		for s.Pos() < end {
			if _, err := s.Next(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkScanCRCBaseline(b *testing.B) {
	l := scanLog(b)
	end := l.WriteOffset()
	data := l.Segments()[0].File.Bytes()[:end]
	table := crc32.MakeTable(crc32.Castagnoli)
	b.SetBytes(end)
	b.ResetTimer()
	var sink uint32
	for i := 0; i < b.N; i++ {
		sink += crc32.Checksum(data, table)
	}
	_ = sink
}

// BenchmarkAppendVsMemcpy interleaves one append and one bare copy of the
// same entry bytes into a second warm mapping, so machine noise hits both
// alike, and reports the ratio append/memcpy throughput.
func BenchmarkAppendVsMemcpy(b *testing.B) {
	l := benchLog(b)
	f, err := mmap.Open(vfs.OS(), filepath.Join(b.TempDir(), "baseline"), benchSegment, mmap.Options{PreTouch: true})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	msgs, qoffs := benchMessages()
	size := EntrySize(nil, msgs)
	h := EntryHeader{Kind: message.KindMessages, Term: 1, StoreTimestamp: 1700000000000, StoreHost: testHost}
	src := make([]byte, size)
	encodeEntry(src, 0, &h, nil, msgs, qoffs, nil)
	dst, pos := f.Bytes(), 0
	out := make([]RecordPos, 0, benchMsgs)
	step := func() (time.Duration, time.Duration) {
		if l.WriteOffset()+size+message.BlankSize > benchSegment {
			l.q.SetWriteOffset(0)
			pos = 0
		}
		h.RaftIndex++
		t0 := time.Now()
		_, out, err = l.AppendEntry(h, nil, msgs, qoffs, out[:0])
		t1 := time.Now()
		pos += copy(dst[pos:], src)
		return t1.Sub(t0), time.Since(t1)
	}
	for l.WriteOffset()+size+message.BlankSize <= benchSegment {
		step()
	}
	b.SetBytes(size)
	b.ResetTimer()
	var tApp, tCopy time.Duration
	for i := 0; i < b.N; i++ {
		a, c := step()
		tApp, tCopy = tApp+a, tCopy+c
	}
	if err != nil {
		b.Fatal(err)
	}
	mb := float64(int64(b.N)*size) / 1e6
	b.ReportMetric(mb/tApp.Seconds(), "append-MB/s")
	b.ReportMetric(mb/tCopy.Seconds(), "memcpy-MB/s")
	b.ReportMetric(tCopy.Seconds()/tApp.Seconds(), "ratio")
}

// BenchmarkIsZero is the clean-end check of the scanner (a segment tail of
// zeros) beside bytes.Equal against a zero buffer (SIMD memequal, which
// needs a second buffer of the same size).
func BenchmarkIsZero(b *testing.B) {
	buf := make([]byte, 16<<20)
	b.SetBytes(int64(len(buf)))
	for i := 0; i < b.N; i++ {
		if !isZero(buf) {
			b.Fatal("not zero")
		}
	}
}

func BenchmarkIsZeroBaselineMemequal(b *testing.B) {
	buf, zero := make([]byte, 16<<20), make([]byte, 16<<20)
	b.SetBytes(int64(len(buf)))
	for i := 0; i < b.N; i++ {
		if !bytes.Equal(buf, zero) {
			b.Fatal("not zero")
		}
	}
}
