package remoting

import (
	"bytes"
	"errors"
	"io"
	"math/rand"
	"reflect"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/internal/testseed"
)

func randCommand(rng *rand.Rand) *Command {
	c := &Command{Code: int16(rng.Intn(400)), Language: uint8(rng.Intn(13)), Version: int16(rng.Intn(500)),
		Opaque: rng.Int31(), Flag: int32(rng.Intn(4)), ExtFields: map[string]string{},
		Serialize: Serialize(rng.Intn(2))}
	if rng.Intn(2) == 0 {
		c.Remark = strings.Repeat("r", rng.Intn(20))
	}
	for i := rng.Intn(5); i > 0; i-- {
		c.ExtFields[string(rune('a'+rng.Intn(26)))+"key"] = strings.Repeat("v\x01\u00e9", rng.Intn(4))
	}
	if n := rng.Intn(300); n > 0 {
		c.Body = make([]byte, n)
		rng.Read(c.Body)
	}
	return c
}

// TestRoundTrip: every command decodes to itself from both header
// encodings, through AppendFrame, ReadCommand and DecodeFrame.
func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(testseed.Seed(t)))
	var stream []byte
	var want []*Command
	for i := 0; i < 500; i++ {
		c := randCommand(rng)
		var err error
		if stream, err = AppendFrame(stream, c); err != nil {
			t.Fatal(err)
		}
		want = append(want, c)
	}
	r := bytes.NewReader(stream)
	for i, w := range want {
		got, err := ReadCommand(r, DefaultMaxFrame)
		if err != nil {
			t.Fatalf("command %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, w) {
			t.Fatalf("command %d:\n got %+v\nwant %+v", i, got, w)
		}
	}
	if _, err := ReadCommand(r, DefaultMaxFrame); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
}

// TestKnownFrames decodes headers written byte by byte from the protocol's
// description: what the Go client sends (JSON) and the binary layout.
func TestKnownFrames(t *testing.T) {
	jsonHeader := []byte(`{"code":105,"language":"GO","version":317,"opaque":7,"flag":0,"remark":"","extFields":{"topic":"T1"}}`)
	var frame []byte
	frame = be.AppendUint32(frame, uint32(4+len(jsonHeader)+3))
	frame = be.AppendUint32(frame, uint32(len(jsonHeader))) // serialize 0
	frame = append(append(frame, jsonHeader...), "abc"...)
	got, err := ReadCommand(bytes.NewReader(frame), DefaultMaxFrame)
	if err != nil {
		t.Fatal(err)
	}
	want := &Command{Code: 105, Language: 9, Version: 317, Opaque: 7, ExtFields: map[string]string{"topic": "T1"},
		Body: []byte("abc"), Serialize: SerializeJSON}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("JSON frame:\n got %+v\nwant %+v", got, want)
	}

	bin := []byte{0, 11, 0, 1, 61, 0, 0, 0, 9, 0, 0, 0, 1, 0, 0, 0, 2, 'o', 'k', 0, 0, 0, 10, 0, 1, 'q', 0, 0, 0, 3, '1', '2', '3'}
	frame = be.AppendUint32(nil, uint32(4+len(bin)))
	frame = be.AppendUint32(frame, 1<<24|uint32(len(bin)))
	frame = append(frame, bin...)
	got, err = ReadCommand(bytes.NewReader(frame), DefaultMaxFrame)
	if err != nil {
		t.Fatal(err)
	}
	want = &Command{Code: 11, Language: 0, Version: 317, Opaque: 9, Flag: 1, Remark: "ok",
		ExtFields: map[string]string{"q": "123"}, Serialize: SerializeRocketMQ}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("binary frame:\n got %+v\nwant %+v", got, want)
	}
	if again, err := AppendFrame(nil, want); err != nil || !bytes.Equal(again, frame) {
		t.Fatalf("re-encoded binary frame differs (%v):\n got % x\nwant % x", err, again, frame)
	}
}

// TestMalformed: every kind of bad frame is refused with ErrMalformed (or
// ErrFrameTooLarge), never a panic.
func TestMalformed(t *testing.T) {
	header := func(ser byte, h []byte) []byte {
		b := be.AppendUint32(nil, uint32(ser)<<24|uint32(len(h)))
		return append(b, h...)
	}
	okBin := appendBinaryHeader(nil, &Command{Code: 1, ExtFields: map[string]string{"k": "v"}})
	fixed := func(tail ...byte) []byte { return append(append([]byte{}, okBin[:13]...), tail...) }  // through the flag
	fields := func(tail ...byte) []byte { return append(append([]byte{}, okBin[:17]...), tail...) } // through the remark
	for _, tc := range []struct {
		want    string // in the error
		payload []byte
	}{
		{"no header length", []byte{0, 0}},
		{"exceeds", be.AppendUint32(nil, 10)},
		{"unknown serialize", header(2, []byte("{}"))},
		{"JSON header", header(0, []byte("{"))},
		{"JSON header", header(0, []byte(`{"code":70000}`))},
		{"language", header(0, []byte(`{"code":1,"language":{}}`))},
		{"JSON header", header(0, []byte(`{"code":1,"extFields":{"a":1}}`))},
		{"at least", header(1, okBin[:binaryFixed-1])},
		{"remark of", header(1, fixed(0, 0, 0, 0x7f, 0, 0, 0, 0))},
		{"remark of -1", header(1, fixed(0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0))},
		{"extFields of 256", header(1, fields(0, 0, 1, 0))},
		{"after the extFields", header(1, append(append([]byte{}, okBin...), 0))},
		{"key of", header(1, fields(0, 0, 0, 2, 0, 9))},
		{"value of", header(1, fields(0, 0, 0, 7, 0, 1, 'k', 0xff, 0xff, 0xff, 0xff))},
	} {
		_, err := DecodeFrame(tc.payload)
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("% x: %v, want ErrMalformed saying %q", tc.payload, err, tc.want)
		}
	}
	if _, err := DecodeFrame(nil); !errors.Is(err, ErrMalformed) {
		t.Errorf("empty payload: %v, want ErrMalformed", err)
	}
	if _, err := ReadCommand(bytes.NewReader(be.AppendUint32(nil, 3)), DefaultMaxFrame); !errors.Is(err, ErrMalformed) {
		t.Errorf("length 3: %v, want ErrMalformed", err)
	}
	if _, err := ReadCommand(bytes.NewReader(be.AppendUint32(nil, 0x80000000)), DefaultMaxFrame); !errors.Is(err, ErrMalformed) {
		t.Errorf("negative length: %v, want ErrMalformed", err)
	}
	// A too-large frame is refused from its prefix alone: nothing else is read.
	if _, err := ReadCommand(bytes.NewReader(be.AppendUint32(nil, 1<<30)), 1<<20); !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("1 GiB frame: %v, want ErrFrameTooLarge", err)
	}
	if _, err := ReadCommand(bytes.NewReader(append(be.AppendUint32(nil, 100), 0, 0, 0, 0)), DefaultMaxFrame); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("truncated body: %v, want io.ErrUnexpectedEOF", err)
	}
	if _, err := AppendFrame(nil, &Command{Serialize: 5}); !errors.Is(err, ErrEncode) {
		t.Errorf("unknown serialize on encode: %v, want ErrEncode", err)
	}
}
