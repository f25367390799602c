package commitlog

import (
	"bytes"
	"math/rand"
	"strconv"
	"testing"

	"github.com/raftmq/raftmq/internal/testseed"
	"github.com/raftmq/raftmq/message"
)

// testSeed is the shared seed source (flag -seed, RAFTMQ_SEED, clock).
func testSeed(t testing.TB) int64 { return testseed.Seed(t) }

// randMessage is a valid message: one of a few topics, a random queue and a
// body of up to 2 KiB, with TAGS and KEYS.
func randMessage(rng *rand.Rand) message.Message {
	props, _ := message.EncodeProperties(message.Property{Key: message.PropertyTags, Value: "t" + strconv.Itoa(rng.Intn(9))},
		message.Property{Key: message.PropertyKeys, Value: "k" + strconv.Itoa(rng.Int())})
	return message.Message{
		Topic: "topic-" + strconv.Itoa(rng.Intn(5)), QueueID: rng.Int31n(64), Flag: rng.Int31(),
		BornTimestamp: rng.Int63(), BornHost: testHost, Body: randBytes(rng, rng.Intn(2048)), Properties: props,
	}
}

// TestGoldenEntry: a one-message entry as AppendEntry writes it at offset
// 0x100 is the frame and the record message encodes, with the CRC32C
// 0x8A3C9CA4 computed independently (bitwise CRC32C over [0,44) and
// [48,150)).
func TestGoldenEntry(t *testing.T) {
	m := message.Message{
		Topic: "T1", QueueID: 3, Flag: 0x10, BornTimestamp: 0x0102030405060708,
		BornHost: message.HostPort{IP: [4]byte{10, 0, 0, 1}, Port: 10911}, ReconsumeTimes: 1,
		Body: []byte("hi"), Properties: []byte("TAGS\x01a\x02"),
	}
	eh := EntryHeader{Kind: message.KindMessages, RaftIndex: 7, Term: 2, StoreTimestamp: 0x1122334455667788,
		StoreHost: message.HostPort{IP: [4]byte{192, 168, 1, 2}, Port: 10911}}
	entry := make([]byte, 150)
	out := encodeEntry(entry, 0x100, &eh, nil, []message.Message{m}, []int64{5}, nil)

	want := make([]byte, 150)
	if err := message.EncodeFrame(want, message.FrameHeader{Size: message.FrameSize, Kind: message.KindMessages, EntrySize: 150,
		RaftIndex: 7, Term: 2, StoreTimestamp: eh.StoreTimestamp, Count: 1, CRC: 0x8A3C9CA4}); err != nil {
		t.Fatal(err)
	}
	if _, err := message.EncodeRecord(want[message.FrameSize:], &m, message.StoreFields{QueueOffset: 5, PhysicalOffset: 0x130,
		StoreTimestamp: eh.StoreTimestamp, StoreHost: eh.StoreHost}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(entry, want) {
		t.Fatalf("entry\n%x\nwant\n%x", entry, want)
	}
	if len(out) != 1 || out[0] != (RecordPos{Offset: 0x130, Size: 102}) {
		t.Fatalf("positions %+v", out)
	}
	if message.EntryCRC(entry) != 0x8A3C9CA4 {
		t.Fatalf("EntryCRC %#x", message.EntryCRC(entry))
	}
}
