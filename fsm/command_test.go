package fsm

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/meta"
	"github.com/raftmq/raftmq/store"
)

func sampleCommands() []Command {
	host := message.HostPort{IP: [4]byte{10, 0, 0, 7}, Port: 9001}
	return []Command{
		{Type: CmdMessageBatch, LeaderTimestamp: 1700000000123, LeaderHost: host, Messages: []message.Message{
			{Topic: "T", QueueID: 3, Flag: 1, SysFlag: 2, BornTimestamp: 42, BornHost: host, ReconsumeTimes: 1,
				PreparedTxOffset: 9, Body: []byte("hello"), Properties: []byte("KEYS\x01k\x02")},
			{Topic: "U", QueueID: 0},
		}},
		{Type: CmdMessageBatch},
		{Type: CmdCommitOffsets, Commits: []store.OffsetCommit{{Group: "g", Topic: "T", QueueID: 1, Offset: 77}}},
		{Type: CmdCreateTopic, Topic: store.TopicConfig{Name: "T", Queues: 8, Perm: 6}},
		{Type: CmdUpdateTopic, Topic: store.TopicConfig{Name: "T", Queues: 16, Perm: 4}},
		{Type: CmdDeleteTopic, TopicName: "T"},
		{Type: CmdSetMemberMeta, MemberID: "n1", MemberAPIAddr: "127.0.0.1:9001"},
		{Type: CmdDeliverDue, LeaderTimestamp: 1700000000999, LeaderHost: host},
		{Type: CmdSetDedup, Dedup: meta.DedupConfig{Window: 64, Expiry: 60_000}},
	}
}

func TestCommandRoundTrip(t *testing.T) {
	for _, c := range sampleCommands() {
		b, err := c.Encode(nil)
		if err != nil {
			t.Fatalf("%s: encode: %v", c.Type, err)
		}
		got, err := DecodeCommand(b)
		if err != nil {
			t.Fatalf("%s: decode: %v", c.Type, err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Fatalf("%s: round trip\n got %+v\nwant %+v", c.Type, got, c)
		}
		// Every strict prefix is rejected, never accepted or panicking.
		for i := 0; i < len(b); i++ {
			if _, err := DecodeCommand(b[:i]); err == nil {
				t.Fatalf("%s: prefix of %d/%d bytes decoded", c.Type, i, len(b))
			}
		}
		if _, err := DecodeCommand(append(bytes.Clone(b), 0)); !errors.Is(err, ErrMalformed) {
			t.Fatalf("%s: trailing byte: err %v", c.Type, err)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	cases := map[string]struct {
		data []byte
		want error
	}{
		"empty":       {nil, ErrMalformed},
		"bad version": {[]byte{2, 1}, ErrUnknownCommand},
		"bad type":    {[]byte{1, 99}, ErrUnknownCommand},
		// A count of 2^16 messages in a 20-byte entry must not allocate them.
		"huge count": {append([]byte{1, 1}, append(make([]byte, 16), 0x80, 0x80, 0x04)...), ErrMalformed},
	}
	for name, tc := range cases {
		if _, err := DecodeCommand(tc.data); !errors.Is(err, tc.want) {
			t.Errorf("%s: err %v, want %v", name, err, tc.want)
		}
	}
}

func TestEncodeBounds(t *testing.T) {
	c := Command{Type: CmdMessageBatch, Messages: make([]message.Message, MaxBatchMessages+1)}
	if _, err := c.Encode(nil); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("too many messages: %v", err)
	}
	c = Command{Type: CmdDeleteTopic, TopicName: string(make([]byte, MaxStringBytes+1))}
	if _, err := c.Encode(nil); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("long name: %v", err)
	}
}

func FuzzDecodeCommand(f *testing.F) {
	for _, c := range sampleCommands() {
		b, _ := c.Encode(nil)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := DecodeCommand(data)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to the same bytes.
		b, err := c.Encode(nil)
		if err != nil {
			t.Fatalf("decoded command does not encode: %v", err)
		}
		if !bytes.Equal(b, data) {
			t.Fatalf("re-encoding differs:\n%x\n%x", b, data)
		}
	})
}

// EncodeMessageBatch over groups is byte-identical to Command.Encode of the
// concatenated messages (the wire format has one encoding).
func TestEncodeMessageBatchEqualsEncode(t *testing.T) {
	c := sampleCommands()[0]
	want, err := c.Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, groups := range [][][]message.Message{
		{c.Messages}, {c.Messages[:1], c.Messages[1:]}, {nil, c.Messages[:1], nil, c.Messages[1:]},
	} {
		got, err := EncodeMessageBatch([]byte("prefix"), c.LeaderTimestamp, c.LeaderHost, len(c.Messages), groups...)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, append([]byte("prefix"), want...)) {
			t.Fatalf("%d groups: encoding differs:\n%x\n%x", len(groups), got, want)
		}
	}
	if _, err := EncodeMessageBatch(nil, 0, c.LeaderHost, 3, c.Messages); !errors.Is(err, ErrMalformed) {
		t.Fatalf("wrong count: %v", err)
	}
	if _, err := EncodeMessageBatch(nil, 0, c.LeaderHost, MaxBatchMessages+1); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("too many: %v", err)
	}
}

// A varint with a redundant trailing zero group is rejected: an entry has
// exactly one encoding.
func TestDecodeRejectsNonMinimalVarint(t *testing.T) {
	c := Command{Type: CmdDeleteTopic, TopicName: "T"}
	b, err := c.Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	// b = version, type, len(1), 'T'; re-encode the length 1 as 0x81 0x00.
	bad := append([]byte{b[0], b[1], 0x81, 0x00}, b[3:]...)
	if _, err := DecodeCommand(bad); !errors.Is(err, ErrMalformed) {
		t.Fatalf("non-minimal varint: err %v", err)
	}
}

// Decoding a MessageBatch of one topic allocates the message slice and one
// topic string, not one string per message.
func TestDecodeBatchAllocations(t *testing.T) {
	c := benchBatch()
	data, err := c.Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := DecodeCommand(data); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 2 {
		t.Fatalf("%v allocations per decode of %d messages, want ≤ 2", allocs, len(c.Messages))
	}
}
