package entrycodec

import (
	"bytes"
	"errors"
	"testing"
)

var (
	errBad   = errors.New("bad")
	errLarge = errors.New("large")
)

func TestRoundTrip(t *testing.T) {
	e := Encoder{TooLarge: errLarge}
	e.I32(-7)
	e.I64(1 << 40)
	e.Uvarint(300)
	e.Str("topic", 8)
	e.Bytes(nil, 8)
	if e.Err != nil {
		t.Fatal(e.Err)
	}
	d := Decoder{Buf: e.Buf, Malformed: errBad}
	if d.I32() != -7 || d.I64() != 1<<40 || d.Count(300, 0) != 300 || d.Str(8) != "topic" || d.Bytes(8, "b") != nil || d.Err != nil || len(d.Buf) != 0 {
		t.Fatalf("decoded wrong: %v, %d bytes left", d.Err, len(d.Buf))
	}
}

func TestBounds(t *testing.T) {
	e := Encoder{TooLarge: errLarge}
	e.Str("too long", 3)
	if !errors.Is(e.Err, errLarge) {
		t.Fatalf("encode over the bound: %v", e.Err)
	}
	for name, b := range map[string][]byte{
		"non-minimal uvarint":  {0x81, 0x00},
		"over the limit":       {9},
		"short":                {5, 'a'},
		"count over the bytes": {4},
	} {
		d := Decoder{Buf: bytes.Clone(b), Malformed: errBad}
		if name == "count over the bytes" {
			d.Count(10, 1)
		} else {
			d.Str(8)
		}
		if !errors.Is(d.Err, errBad) || d.I32() != 0 {
			t.Errorf("%s: %v", name, d.Err)
		}
	}
}
