package index

import (
	"encoding/hex"
	"errors"
	"math"
	"testing"
)

func TestLayoutGolden(t *testing.T) {
	if got := FileSize(DefaultMaxHashSlots, DefaultMaxIndexes); got != 420_000_040 {
		t.Fatalf("default file size = %d", got)
	}
	h := Header{BeginTimestamp: 1, EndTimestamp: 2, BeginPhyOffset: 3, EndPhyOffset: 0x0102030405060708, HashSlotCount: 5, IndexCount: 6}
	b := make([]byte, HeaderSize)
	h.Encode(b)
	want := "0000000000000001" + "0000000000000002" + "0000000000000003" + "0102030405060708" + "00000005" + "00000006"
	if got := hex.EncodeToString(b); got != want {
		t.Fatalf("header = %s\nwant     %s", got, want)
	}
	if got, err := DecodeHeader(b); err != nil || got != h {
		t.Fatalf("decode header = %+v, %v", got, err)
	}
	e := Entry{KeyHash: 0x7fffffff, PhyOffset: 0x1122334455667788, TimeDiff: 9, PrevIndex: -1}
	eb := make([]byte, EntrySize)
	e.Encode(eb)
	if got := hex.EncodeToString(eb); got != "7fffffff"+"1122334455667788"+"00000009"+"ffffffff" {
		t.Fatalf("entry = %s", got)
	}
	if got, err := DecodeEntry(eb); err != nil || got != e {
		t.Fatalf("decode entry = %+v, %v", got, err)
	}
	l := layout{slots: DefaultMaxHashSlots, indexes: DefaultMaxIndexes}
	if l.slotPos(1) != 44 || l.entryPos(0) != 20_000_040 || l.entryPos(1) != 20_000_060 {
		t.Fatalf("positions %d %d %d", l.slotPos(1), l.entryPos(0), l.entryPos(1))
	}
}

func TestDecodeShort(t *testing.T) {
	if _, err := DecodeHeader(make([]byte, HeaderSize-1)); !errors.Is(err, ErrShort) {
		t.Fatal(err)
	}
	if _, err := DecodeEntry(make([]byte, EntrySize-1)); !errors.Is(err, ErrShort) {
		t.Fatal(err)
	}
}

func TestJavaHashCode(t *testing.T) {
	for _, c := range []struct {
		s    string
		want int32
	}{
		{"", 0},
		{"hello", 99162322},
		{"Aa", 2112},
		{"BB", 2112},
		{"é", 233},
		{"\U0001F600", 31*0xD83D + 0xDE00},
		{"polygenelubricants", math.MinInt32},
		{"TopicTest#OrderID188", javaHashCodeSlow("TopicTest#OrderID188")},
	} {
		if got := JavaHashCode(c.s); got != c.want {
			t.Errorf("JavaHashCode(%q) = %d, want %d", c.s, got, c.want)
		}
	}
	if KeyHash("polygenelubricants") != 0 {
		t.Error("MinInt32 must map to 0")
	}
	if h := JavaHashCode("zzzzzzzzzz"); h >= 0 || KeyHash("zzzzzzzzzz") != -h {
		t.Errorf("negative hash %d not folded: %d", h, KeyHash("zzzzzzzzzz"))
	}
}

func TestFileName(t *testing.T) {
	for _, c := range []struct {
		ts   int64
		name string
	}{
		{0, "19700101000000000"},
		{1_700_000_000_123, "20231114221320123"},
		{-5, "19700101000000000"},
		{math.MaxInt64, "99991231235959999"},
	} {
		if got := FileName(c.ts); got != c.name {
			t.Errorf("FileName(%d) = %s, want %s", c.ts, got, c.name)
		}
	}
	if ts, err := ParseFileName("20231114221320123"); err != nil || ts != 1_700_000_000_123 {
		t.Fatalf("parse = %d, %v", ts, err)
	}
	for _, bad := range []string{"", "2023111422132012", "2023111422132012x", "20231314221320123", "abc"} {
		if _, err := ParseFileName(bad); !errors.Is(err, ErrFileName) {
			t.Errorf("ParseFileName(%q) err = %v", bad, err)
		}
	}
}

// TestSelectBounded: hostile chains (self loop, cycle, forward link) end.
func TestSelectBounded(t *testing.T) {
	l := layout{slots: 1, indexes: 4}
	b := make([]byte, l.size())
	h := Header{IndexCount: 4}
	l.writeSlot(b, 0, 3)
	Entry{KeyHash: 0, PhyOffset: 30, PrevIndex: 3}.Encode(b[l.entryPos(3):]) // self loop
	got := l.selectPhyOffsets(b, h, 0, 100, 0, math.MaxInt64, nil)
	if len(got) != 1 || got[0] != 30 {
		t.Fatalf("self loop: %v", got)
	}
	Entry{KeyHash: 0, PhyOffset: 30, PrevIndex: 2}.Encode(b[l.entryPos(3):])
	Entry{KeyHash: 0, PhyOffset: 20, PrevIndex: 3}.Encode(b[l.entryPos(2):]) // cycle back up
	got = l.selectPhyOffsets(b, h, 0, 100, 0, math.MaxInt64, nil)
	if len(got) != 2 || got[1] != 20 {
		t.Fatalf("cycle: %v", got)
	}
	h.IndexCount = 3 // slot value beyond indexCount: ignored
	if got = l.selectPhyOffsets(b, h, 0, 100, 0, math.MaxInt64, nil); len(got) != 0 {
		t.Fatalf("slot beyond count: %v", got)
	}
}

// FuzzSelect: decoding and walking a chain over arbitrary file bytes never
// panics and is bounded by the entry count.
func FuzzSelect(f *testing.F) {
	f.Add([]byte{}, uint8(1), uint8(2), int32(0), int64(0), int64(math.MaxInt64))
	seed := make([]byte, FileSize(2, 4))
	Header{IndexCount: 3}.Encode(seed)
	seed[HeaderSize+3] = 2
	f.Add(seed, uint8(2), uint8(4), int32(0), int64(0), int64(1000))
	f.Fuzz(func(t *testing.T, data []byte, slots, indexes uint8, hash int32, begin, end int64) {
		l := layout{slots: int(slots%16) + 1, indexes: int(indexes%32) + 2}
		b := make([]byte, l.size())
		copy(b, data)
		h, err := DecodeHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		for n := 0; n < l.indexes; n++ {
			if _, ok := l.readEntry(b, n); !ok {
				t.Fatalf("entry %d unreadable", n)
			}
		}
		got := l.selectPhyOffsets(b, h, hash, 1<<20, begin, end, nil)
		if len(got) >= l.indexes {
			t.Fatalf("%d results from %d entries", len(got), l.indexes)
		}
		_ = l.selectPhyOffsets(data, h, hash, 3, begin, end, nil) // short buffer
	})
}
