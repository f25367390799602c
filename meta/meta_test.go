package meta

import (
	"encoding/hex"
	"errors"
	"reflect"
	"testing"
)

func sample() *Meta {
	m := New()
	m.Topics["b"] = TopicConfig{Name: "b", Queues: 2, Perm: 6}
	m.Topics["a"] = TopicConfig{Name: "a", Queues: 1, Perm: 4}
	m.Queues[QueueKey{Topic: "b", Queue: 1}] = 7
	m.Queues[QueueKey{Topic: "a", Queue: 0}] = 3
	m.Offsets[OffsetKey{Group: "g", QueueKey: QueueKey{Topic: "a", Queue: 0}}] = 2
	return m
}

// The meta encoding is an on-disk format (checkpoint, snapshot): its bytes
// are pinned.
func TestMetaGolden(t *testing.T) {
	const want = "01" + "00000002" + "000161" + "00000001" + "00000004" + "000162" + "00000002" + "00000006" +
		"00000002" + "000161" + "00000000" + "0000000000000003" + "000162" + "00000001" + "0000000000000007" +
		"00000001" + "000167" + "000161" + "00000000" + "0000000000000002"
	got := hex.EncodeToString(sample().Encode())
	if got != want {
		t.Fatalf("encoding\n got %s\nwant %s", got, want)
	}
	m, err := Decode(sample().Encode())
	if err != nil || !reflect.DeepEqual(m, sample()) {
		t.Fatalf("decode: %v %+v", err, m)
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
		{EncodeCreateTopic(TopicConfig{Name: "t", Queues: 4, Perm: 6}), "01" + "000174" + "00000004" + "00000006"},
		{EncodeDeleteTopic("t"), "02" + "000174"},
		{EncodeCommitOffsets([]OffsetCommit{{Group: "g", Topic: "t", QueueID: 1, Offset: 9}}),
			"03" + "00000001" + "000167" + "000174" + "00000001" + "0000000000000009"},
		{EncodeUpdateTopic(TopicConfig{Name: "t", Queues: 8}), "04" + "000174" + "00000008" + "00000000"},
	} {
		if got := hex.EncodeToString(c.frame); got != c.want {
			t.Errorf("frame\n got %s\nwant %s", got, c.want)
		}
	}
}

func TestApply(t *testing.T) {
	m := New()
	for _, f := range [][]byte{
		EncodeCreateTopic(TopicConfig{Name: "t", Queues: 4, Perm: 6}),
		EncodeCreateTopic(TopicConfig{Name: "u", Queues: 1, Perm: 6}),
		EncodeUpdateTopic(TopicConfig{Name: "t", Queues: 8}),
		EncodeUpdateTopic(TopicConfig{Name: "missing", Queues: 8}),
		EncodeCommitOffsets([]OffsetCommit{{Group: "g", Topic: "u", QueueID: 0, Offset: 5}}),
		EncodeDeleteTopic("u"),
	} {
		if err := m.Apply(f); err != nil {
			t.Fatalf("apply %x: %v", f, err)
		}
	}
	want := New()
	want.Topics["t"] = TopicConfig{Name: "t", Queues: 8, Perm: 6}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("got %+v, want %+v", m, want)
	}
	if m.TotalQueues() != 8 {
		t.Fatalf("total queues %d", m.TotalQueues())
	}
	if name, ok := DeletedTopic(EncodeDeleteTopic("u")); !ok || name != "u" {
		t.Fatalf("DeletedTopic: %q %v", name, ok)
	}
	if _, ok := DeletedTopic(EncodeCreateTopic(TopicConfig{Name: "u"})); ok {
		t.Fatal("a create frame is not a delete")
	}
}

func TestApplyRejectsMalformed(t *testing.T) {
	good := EncodeCreateTopic(TopicConfig{Name: "t", Queues: 4, Perm: 6})
	for _, f := range [][]byte{nil, {9}, good[:len(good)-1], append(good, 0), {CmdCommitOffsets, 0xff, 0xff, 0xff, 0xff}} {
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
	f.Add(EncodeCreateTopic(TopicConfig{Name: "t", Queues: 4, Perm: 6}))
	f.Add(EncodeUpdateTopic(TopicConfig{Name: "a", Queues: 3}))
	f.Add(EncodeDeleteTopic("a"))
	f.Add(EncodeCommitOffsets([]OffsetCommit{{Group: "g", Topic: "a", QueueID: 0, Offset: 5}}))
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
