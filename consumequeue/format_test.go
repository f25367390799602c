package consumequeue

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"testing"
)

func TestUnitGolden(t *testing.T) {
	u := Unit{PhyOffset: 0x0102030405060708, Size: 0x0a0b0c0d, TagsCode: -2}
	b := make([]byte, UnitSize)
	u.Encode(b)
	const want = "0102030405060708" + "0a0b0c0d" + "fffffffffffffffe"
	if got := hex.EncodeToString(b); got != want {
		t.Fatalf("encode = %s, want %s", got, want)
	}
	got, err := DecodeUnit(b)
	if err != nil || got != u {
		t.Fatalf("decode = %+v, %v; want %+v", got, err, u)
	}
	Filler.Encode(b)
	if h := hex.EncodeToString(b); h != "0000000000000000"+"7fffffff"+"0000000000000000" {
		t.Fatalf("filler = %s", h)
	}
	if DefaultFileSize != 6_000_000 {
		t.Fatalf("DefaultFileSize = %d", DefaultFileSize)
	}
}

func TestDecodeUnitShort(t *testing.T) {
	if _, err := DecodeUnit(make([]byte, UnitSize-1)); !errors.Is(err, ErrShortUnit) {
		t.Fatalf("err = %v, want ErrShortUnit", err)
	}
}

func TestUnitValid(t *testing.T) {
	for _, c := range []struct {
		u    Unit
		want bool
	}{
		{Unit{0, 1, 0}, true},
		{Unit{5, 0, 0}, false},
		{Unit{5, -1, 0}, false},
		{Unit{-1, 10, 0}, false},
		{Unit{math.MaxInt64 - 5, 10, 0}, false},
		{Filler, true},
	} {
		if got := c.u.Valid(); got != c.want {
			t.Errorf("%+v.Valid() = %v", c.u, got)
		}
	}
}

func encodeUnits(us ...Unit) []byte {
	b := make([]byte, len(us)*UnitSize)
	for i, u := range us {
		u.Encode(b[i*UnitSize:])
	}
	return b
}

func TestScanUnits(t *testing.T) {
	cases := []struct {
		name    string
		units   []Unit
		st      scanState
		n       int
		stopped bool
	}{
		{"empty", nil, scanState{}, 0, false},
		{"valid", []Unit{{0, 10, 1}, {10, 5, 2}, {20, 1, 3}}, scanState{}, 3, false},
		{"zero ends", []Unit{{0, 10, 1}, {}, {20, 1, 3}}, scanState{}, 1, true},
		{"overlap ends", []Unit{{0, 10, 1}, {5, 10, 2}}, scanState{}, 1, true},
		{"fillers first", []Unit{Filler, Filler, {100, 10, 0}}, scanState{fillersOK: true}, 3, false},
		{"filler after real", []Unit{{100, 10, 0}, Filler}, scanState{fillersOK: true}, 1, true},
		{"fillers not ok", []Unit{Filler}, scanState{}, 0, true},
		{"before prevEnd", []Unit{{99, 1, 0}}, scanState{prevEnd: 100}, 0, true},
	}
	for _, c := range cases {
		n, _, stopped := scanUnits(encodeUnits(c.units...), c.st)
		if n != c.n || stopped != c.stopped {
			t.Errorf("%s: n=%d stopped=%v, want %d %v", c.name, n, stopped, c.n, c.stopped)
		}
	}
}

func FuzzDecodeUnit(f *testing.F) {
	f.Add(make([]byte, UnitSize))
	f.Add(encodeUnits(Filler))
	f.Add(encodeUnits(Unit{1 << 40, 300, -7}))
	f.Fuzz(func(t *testing.T, b []byte) {
		u, err := DecodeUnit(b)
		if len(b) < UnitSize {
			if err == nil {
				t.Fatal("short input decoded")
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		out := make([]byte, UnitSize)
		u.Encode(out)
		if !bytes.Equal(out, b[:UnitSize]) {
			t.Fatalf("round trip %x != %x", out, b[:UnitSize])
		}
	})
}

// FuzzScanUnits: whatever the bytes, the accepted units form a valid queue
// prefix: fillers only before real units, real units valid and ordered.
func FuzzScanUnits(f *testing.F) {
	f.Add(encodeUnits(Filler, Unit{10, 5, 1}, Unit{15, 5, 2}, Unit{}), true)
	f.Add(encodeUnits(Unit{10, 5, 1}, Unit{12, 5, 2}), false)
	f.Fuzz(func(t *testing.T, b []byte, fillersOK bool) {
		n, st, stopped := scanUnits(b, scanState{fillersOK: fillersOK})
		if n < 0 || n*UnitSize > len(b) || (!stopped && (n+1)*UnitSize <= len(b)) {
			t.Fatalf("n=%d stopped=%v for %d bytes", n, stopped, len(b))
		}
		checkPrefix(t, b[:n*UnitSize], fillersOK, st.prevEnd)
	})
}

func checkPrefix(t *testing.T, b []byte, fillersOK bool, wantEnd int64) {
	t.Helper()
	var prevEnd int64
	for p := 0; p < len(b); p += UnitSize {
		u := decodeUnit(b[p:])
		switch {
		case !u.Valid():
			t.Fatalf("invalid unit %+v accepted", u)
		case u.IsFiller():
			if !fillersOK {
				t.Fatalf("filler accepted at %d", p)
			}
		default:
			if u.PhyOffset < prevEnd {
				t.Fatalf("unit %+v before previous end %d", u, prevEnd)
			}
			fillersOK = false
			prevEnd = u.End()
		}
	}
	if prevEnd != wantEnd {
		t.Fatalf("prevEnd %d, want %d", prevEnd, wantEnd)
	}
}
