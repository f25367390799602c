package meta

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func frame(t CommandType, topic TopicConfig, commits []OffsetCommit) []byte {
	return (&Command{Type: t, Topic: topic, Commits: commits}).Frame()
}

func sample() *Meta {
	m := New()
	m.Topics["b"] = TopicConfig{Name: "b", Queues: 2, Perm: 6}
	m.Topics["a"] = TopicConfig{Name: "a", Queues: 1, Perm: 4}
	m.Queues[QueueKey{Topic: "b", Queue: 1}] = 7
	m.Queues[QueueKey{Topic: "a", Queue: 0}] = 3
	m.Offsets[OffsetKey{Group: "g", QueueKey: QueueKey{Topic: "a", Queue: 0}}] = 2
	m.Producers.Store([]byte("p"), 5, 1000)
	m.Producers.Store([]byte("p"), 2, 1000)
	m.Producers.nextSweep = 0
	m.Timer.UpTo = 5000
	m.Timer.Done[7] = 9
	m.Timer.Delivered = 3
	m.Members["n2"] = "h:2"
	m.Members["n1"] = "h:1"
	return m
}

// The meta encoding is an on-disk format (checkpoint, snapshot): its bytes
// are pinned.
func TestMetaGolden(t *testing.T) {
	const v1 = "01" + "00000002" + "000161" + "00000001" + "00000004" + "000162" + "00000002" + "00000006" +
		"00000002" + "000161" + "00000000" + "0000000000000003" + "000162" + "00000001" + "0000000000000007" +
		"00000001" + "000167" + "000161" + "00000000" + "0000000000000002"
	v2 := "02" + "00000002" + "000161" + "00000001" + "00000004" + "000162" + "00000002" + "00000006" +
		"00000002" + "000161" + "00000000" + "0000000000000003" + "000162" + "00000001" + "0000000000000007" +
		"00000001" + "000167" + "000161" + "00000000" + "0000000000000002" +
		"00001000" + "000000000036ee80" + // dedup window 4096, expiry 1 h
		"00000001" + "000170" + "00000000000003e8" + "0000000000000005" + "00001000" + // producer "p", stored at 1000, max 5, window 4096
		"0000000000000024" + strings.Repeat("0000000000000000", 63) + // sequences 2 and 5 stored

		"0000000000001388" + "0000000000000003" + "00000001" + "00000007" + "0000000000000009" // timer: up to 5000, 3 delivered, bucket 7 done below 9
	want := "03" + v2[2:] + "00000002" + "00026e31" + "0003683a31" + "00026e32" + "0003683a32" // members n1 → h:1, n2 → h:2
	got := hex.EncodeToString(sample().Encode())
	if got != want {
		t.Fatalf("encoding\n got %s\nwant %s", got, want)
	}
	m, err := Decode(sample().Encode())
	if err != nil || !reflect.DeepEqual(m, sample()) {
		t.Fatalf("decode: %v %+v", err, m)
	}
	// A version 1 encoding (before the producer table) still decodes, with
	// an empty table and the default settings.
	old, _ := hex.DecodeString(v1)
	m, err = Decode(old)
	want1 := sample()
	want1.Producers = newProducers(DefaultDedupConfig())
	want1.Timer = newTimer()
	want1.Members = map[string]string{}
	if err != nil || !reflect.DeepEqual(m, want1) {
		t.Fatalf("decode of version 1: %v %+v", err, m)
	}
	// A version 2 encoding (before the member map) decodes with none.
	old, _ = hex.DecodeString(v2)
	m, err = Decode(old)
	want2 := sample()
	want2.Members = map[string]string{}
	if err != nil || !reflect.DeepEqual(m, want2) {
		t.Fatalf("decode of version 2: %v %+v", err, m)
	}
	if m, err := Decode(nil); err != nil || len(m.Topics) != 0 {
		t.Fatalf("decode of nothing: %v %+v", err, m)
	}
}

// Command frames are an on-disk format (commitlog): their bytes are pinned.
func TestCommandFramesGolden(t *testing.T) {
	for _, c := range []struct {
		frame []byte
		want  string
	}{
		{frame(CreateTopic, TopicConfig{Name: "t", Queues: 4, Perm: 6}, nil), "01" + "000174" + "00000004" + "00000006"},
		{frame(DeleteTopic, TopicConfig{Name: "t"}, nil), "02" + "000174"},
		{frame(CommitOffsets, TopicConfig{}, []OffsetCommit{{Group: "g", Topic: "t", QueueID: 1, Offset: 9}}),
			"03" + "00000001" + "000167" + "000174" + "00000001" + "0000000000000009"},
		{frame(UpdateTopic, TopicConfig{Name: "t", Queues: 8}, nil), "04" + "000174" + "00000008" + "00000000"},
		{(&Command{Type: SetDedup, Dedup: DedupConfig{Window: 64, Expiry: 90_000}}).Frame(), "05" + "00000040" + "0000000000015f90"},
		{(&Command{Type: SetMember, MemberID: "n1", MemberAPIAddr: "h:1"}).Frame(), "06" + "00026e31" + "0003683a31"},
	} {
		if got := hex.EncodeToString(c.frame); got != c.want {
			t.Errorf("frame\n got %s\nwant %s", got, c.want)
		}
	}
}

func TestApply(t *testing.T) {
	m := New()
	for _, f := range [][]byte{
		frame(CreateTopic, TopicConfig{Name: "t", Queues: 4, Perm: 6}, nil),
		frame(CreateTopic, TopicConfig{Name: "u", Queues: 1, Perm: 6}, nil),
		frame(UpdateTopic, TopicConfig{Name: "t", Queues: 8}, nil),
		frame(UpdateTopic, TopicConfig{Name: "missing", Queues: 8}, nil),
		frame(CommitOffsets, TopicConfig{}, []OffsetCommit{{Group: "g", Topic: "u", QueueID: 0, Offset: 5}}),
		frame(DeleteTopic, TopicConfig{Name: "u"}, nil),
		(&Command{Type: SetMember, MemberID: "n1", MemberAPIAddr: "h:1"}).Frame(),
		(&Command{Type: SetMember, MemberID: "n1", MemberAPIAddr: "h:9"}).Frame(),
	} {
		if err := m.Apply(f); err != nil {
			t.Fatalf("apply %x: %v", f, err)
		}
	}
	want := New()
	want.Topics["t"] = TopicConfig{Name: "t", Queues: 8, Perm: 6}
	want.Members["n1"] = "h:9" // the last address recorded wins
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("got %+v, want %+v", m, want)
	}
	if m.TotalQueues() != 8 {
		t.Fatalf("total queues %d", m.TotalQueues())
	}
	if name, ok := DeletedTopic(frame(DeleteTopic, TopicConfig{Name: "u"}, nil)); !ok || name != "u" {
		t.Fatalf("DeletedTopic: %q %v", name, ok)
	}
	if _, ok := DeletedTopic(frame(CreateTopic, TopicConfig{Name: "u"}, nil)); ok {
		t.Fatal("a create frame is not a delete")
	}
}

func TestApplyRejectsMalformed(t *testing.T) {
	good := frame(CreateTopic, TopicConfig{Name: "t", Queues: 4, Perm: 6}, nil)
	for _, f := range [][]byte{nil, {9}, good[:len(good)-1], append(good, 0), {byte(CommitOffsets), 0xff, 0xff, 0xff, 0xff}} {
		m := New()
		if err := m.Apply(f); !errors.Is(err, ErrMalformed) {
			t.Errorf("apply %x: %v", f, err)
		}
		if len(m.Topics) != 0 {
			t.Errorf("apply %x changed meta: %+v", f, m)
		}
	}
}

// FuzzDecode: never panics; what decodes re-encodes to bytes that decode
// to the same state (not always to data itself: Decode takes keys in any
// order, and a repeated key once).
func FuzzDecode(f *testing.F) {
	f.Add(sample().Encode())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		again, err := Decode(m.Encode())
		if err != nil || !reflect.DeepEqual(again, m) {
			t.Fatalf("re-encode of %x: %v %+v, want %+v", data, err, again, m)
		}
	})
}

// FuzzApply: never panics; a frame is applied whole or not at all.
func FuzzApply(f *testing.F) {
	f.Add(frame(CreateTopic, TopicConfig{Name: "t", Queues: 4, Perm: 6}, nil))
	f.Add(frame(UpdateTopic, TopicConfig{Name: "a", Queues: 3}, nil))
	f.Add(frame(DeleteTopic, TopicConfig{Name: "a"}, nil))
	f.Add(frame(CommitOffsets, TopicConfig{}, []OffsetCommit{{Group: "g", Topic: "a", QueueID: 0, Offset: 5}}))
	f.Add((&Command{Type: SetMember, MemberID: "n1", MemberAPIAddr: "h:1"}).Frame())
	f.Fuzz(func(t *testing.T, frame []byte) {
		m := sample()
		err := m.Apply(frame)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			if !reflect.DeepEqual(m, sample()) {
				t.Fatalf("a rejected frame changed meta: %+v", m)
			}
		}
	})
}

func sampleCommands() []Command {
	return []Command{
		{Type: CommitOffsets, Commits: []OffsetCommit{{Group: "g", Topic: "t", QueueID: 1, Offset: 9}}},
		{Type: CommitOffsets},
		{Type: CreateTopic, Topic: TopicConfig{Name: "t", Queues: 4, Perm: 6}},
		{Type: UpdateTopic, Topic: TopicConfig{Name: "t", Queues: 8}},
		{Type: DeleteTopic, Topic: TopicConfig{Name: "t"}},
	}
}

// Both layouts of a command decode to the command; every strict prefix and
// a trailing byte are refused.
func TestCommandLayoutsRoundTrip(t *testing.T) {
	for _, c := range sampleCommands() {
		body, err := c.AppendEntryBody(nil)
		if err != nil {
			t.Fatalf("%s: %v", c.Type, err)
		}
		layouts := map[string]func([]byte) (Command, error){
			"frame": DecodeFrame,
			"entry": func(b []byte) (Command, error) { return DecodeEntryBody(c.Type, b) },
		}
		encoded := map[string][]byte{"frame": c.Frame(), "entry": body}
		for name, decode := range layouts {
			b := encoded[name]
			got, err := decode(b)
			if err != nil || !reflect.DeepEqual(got, c) {
				t.Fatalf("%s %s: %+v %v, want %+v", c.Type, name, got, err, c)
			}
			for i := 0; i < len(b); i++ {
				if _, err := decode(b[:i]); !errors.Is(err, ErrMalformed) {
					t.Fatalf("%s %s: prefix %d/%d: %v", c.Type, name, i, len(b), err)
				}
			}
			if _, err := decode(append(bytes.Clone(b), 0)); !errors.Is(err, ErrMalformed) {
				t.Fatalf("%s %s: trailing byte: %v", c.Type, name, err)
			}
		}
	}
}

func TestEntryBodyBounds(t *testing.T) {
	long := TopicConfig{Name: string(make([]byte, MaxStringBytes+1))}
	if _, err := (&Command{Type: CreateTopic, Topic: long}).AppendEntryBody(nil); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("long name: %v", err)
	}
	many := &Command{Type: CommitOffsets, Commits: make([]OffsetCommit, MaxCommits+1)}
	if _, err := many.AppendEntryBody(nil); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("many commits: %v", err)
	}
	// A non-minimal uvarint is refused: an entry has one encoding.
	if _, err := DecodeEntryBody(DeleteTopic, []byte{0x81, 0x00, 't'}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("non-minimal length: %v", err)
	}
}

// FuzzDecodeEntryBody: never panics; what decodes re-encodes to itself (a
// Raft entry has one encoding) and, as a frame, decodes to the same command.
func FuzzDecodeEntryBody(f *testing.F) {
	for _, c := range sampleCommands() {
		body, _ := c.AppendEntryBody(nil)
		f.Add(byte(c.Type), body)
	}
	f.Fuzz(func(t *testing.T, typ byte, body []byte) {
		c, err := DecodeEntryBody(CommandType(typ), body)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		again, err := c.AppendEntryBody(nil)
		if err != nil || !bytes.Equal(again, body) {
			t.Fatalf("re-encode: %x %v, want %x", again, err, body)
		}
		if f, err := DecodeFrame(c.Frame()); err != nil || !reflect.DeepEqual(f, c) {
			t.Fatalf("as a frame: %+v %v, want %+v", f, err, c)
		}
	})
}

// FuzzDecodeFrame: never panics; what decodes re-encodes to itself.
func FuzzDecodeFrame(f *testing.F) {
	for _, c := range sampleCommands() {
		f.Add(c.Frame())
	}
	f.Add((&Command{Type: SetMember, MemberID: "n1", MemberAPIAddr: "h:1"}).Frame())
	f.Fuzz(func(t *testing.T, frame []byte) {
		c, err := DecodeFrame(frame)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		if again := c.Frame(); !bytes.Equal(again, frame) {
			t.Fatalf("re-encode: %x, want %x", again, frame)
		}
	})
}
