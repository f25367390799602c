package message

import (
	"bytes"
	"errors"
	"flag"
	"math/rand"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/internal/testseed"
)

var genCorpus = flag.Bool("gencorpus", false, "rewrite the seed corpora in testdata/fuzz")

func FuzzDecodeRecord(f *testing.F) {
	f.Add(goldenRecord(f))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkRecordAgrees(t, data)
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

// checkRecordAgrees: CheckRecord accepts exactly what
// DecodeRecordSkipBodyCRC accepts, with the same error, and reports the same
// head.
func checkRecordAgrees(t *testing.T, data []byte) {
	t.Helper()
	h, herr := CheckRecord(data)
	r, rerr := DecodeRecordSkipBodyCRC(data)
	if (herr == nil) != (rerr == nil) || (herr != nil && herr.Error() != rerr.Error()) {
		t.Fatalf("CheckRecord: %v, DecodeRecordSkipBodyCRC: %v", herr, rerr)
	}
	if herr == nil && (h.Size != r.Size || h.PhysicalOffset != r.PhysicalOffset || h.StoreTimestamp != r.StoreTimestamp || h.StoreHost != r.StoreHost) {
		t.Fatalf("CheckRecord %+v, DecodeRecordSkipBodyCRC %+v", h, r)
	}
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

// FuzzParseOffsetMsgID: never panics, and an id it accepts renders back to
// itself (upper case).
func FuzzParseOffsetMsgID(f *testing.F) {
	f.Add("0A00000700002A9F0000000000001234")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		h, phy, err := ParseOffsetMsgID(s)
		if err == nil && OffsetMsgID(h, phy) != strings.ToUpper(s) {
			t.Fatalf("%q does not round trip", s)
		}
		if err != nil && !errors.Is(err, ErrBadMsgID) {
			t.Fatalf("%q: error %v is not ErrBadMsgID", s, err)
		}
	})
}

// FuzzProperties: the decoder never panics, and what it yields re-encodes
// (AppendProperty) to bytes that decode to the same pairs.
func FuzzProperties(f *testing.F) {
	f.Add([]byte("UNIQ_KEY\x01ABC\x02KEYS\x01k1 k2\x02"))
	f.Add([]byte("\x01\x02\x02\x01"))
	f.Add([]byte("novalue"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var pairs []Property
		var enc []byte
		for k, v := range Properties(b) {
			pairs = append(pairs, Property{Key: string(k), Value: string(v)})
			enc = AppendProperty(enc, string(k), string(v))
		}
		i := 0
		for k, v := range Properties(enc) {
			if i >= len(pairs) || string(k) != pairs[i].Key || string(v) != pairs[i].Value {
				t.Fatalf("pair %d changed after re-encoding", i)
			}
			if got, ok := GetProperty(enc, string(k)); !ok || string(got) != firstValue(pairs, string(k)) {
				t.Fatalf("GetProperty(%q) = %q, %v", k, got, ok)
			}
			i++
		}
		if i != len(pairs) {
			t.Fatalf("%d pairs after re-encoding, want %d", i, len(pairs))
		}
	})
}

// firstValue is the value of the first pair with key.
func firstValue(pairs []Property, key string) string {
	for _, p := range pairs {
		if p.Key == key {
			return p.Value
		}
	}
	return ""
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
		testseed.WriteFuzzSeed(t, "FuzzDecodeRecord", i, rec[:n])
		testseed.WriteFuzzSeed(t, "FuzzDecodeRecord", 10+i, rec[:n-1-i])
	}
	frame := make([]byte, FrameSize)
	for i, h := range []FrameHeader{
		{Size: FrameSize, Kind: KindMessages, EntrySize: FrameSize + 2*RecordFixedSize, RaftIndex: 7, Term: 2, Count: 2},
		{Size: FrameSize + 10, Kind: KindCommand, EntrySize: FrameSize + 10, RaftIndex: 8, Term: 2},
		{Size: FrameSize, Kind: KindNoop, EntrySize: FrameSize, RaftIndex: 9, Term: 3},
	} {
		h.StoreTimestamp, h.CRC = rng.Int63(), rng.Uint32()
		if err := EncodeFrame(frame, h); err != nil {
			t.Fatal(err)
		}
		testseed.WriteFuzzSeed(t, "FuzzDecodeFrame", i, frame)
	}
}
