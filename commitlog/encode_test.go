package commitlog

import (
	"bytes"
	"math/rand"
	"testing"

	"github.com/raftmq/raftmq/internal/testseed"
	"github.com/raftmq/raftmq/message"
)

// TestEncodeEntryMatchesReference: the one-pass writer (CRC over the source
// pieces, stack gap) produces exactly the bytes of the straightforward
// encoding (EncodeFrame, EncodeRecord per message, EntryCRC over the result)
// for random entries, including properties larger than the gap and command
// payloads.
func TestEncodeEntryMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewSource(testseed.Seed(t)))
	for iter := 0; iter < 300; iter++ {
		h := EntryHeader{Kind: message.KindMessages, RaftIndex: rng.Uint64(), Term: rng.Uint64(), StoreTimestamp: rng.Int63(), StoreHost: testHost}
		var command []byte
		n := rng.Intn(20)
		if rng.Intn(5) == 0 {
			h.Kind, n = message.KindCommand, 0
			command = randBytes(rng, rng.Intn(3000))
		}
		msgs := make([]message.Message, n)
		qoffs := make([]int64, n)
		for i := range msgs {
			msgs[i] = message.Message{
				Topic: "T" + string(randBytes(rng, rng.Intn(100)+1)), QueueID: rng.Int31(), Flag: rng.Int31(),
				BornTimestamp: rng.Int63(), BornHost: message.HostPort{IP: [4]byte{1, 2, 3, 4}, Port: rng.Int31()},
				ReconsumeTimes: rng.Int31(), PreparedTxOffset: rng.Int63(),
				Body: randBytes(rng, []int{0, 1, 100, 1024, 5000}[rng.Intn(5)]), Properties: randBytes(rng, []int{0, 3, 900, 1100, 4000}[rng.Intn(5)]),
			}
			qoffs[i] = rng.Int63()
		}
		size := EntrySize(command, msgs)
		start := rng.Int63n(1 << 40)
		got := make([]byte, size)
		pos := encodeEntry(got, start, &h, command, msgs, qoffs, nil)

		want := make([]byte, size)
		_ = message.EncodeFrame(want, message.FrameHeader{Size: int32(message.FrameSize + len(command)), Kind: h.Kind, EntrySize: int32(size),
			RaftIndex: h.RaftIndex, Term: h.Term, StoreTimestamp: h.StoreTimestamp, Count: int32(n)})
		p := message.FrameSize + copy(want[message.FrameSize:], command)
		for i := range msgs {
			k, err := message.EncodeRecord(want[p:], &msgs[i], message.StoreFields{QueueOffset: qoffs[i], PhysicalOffset: start + int64(p),
				StoreTimestamp: h.StoreTimestamp, StoreHost: h.StoreHost})
			if err != nil {
				t.Fatal(err)
			}
			if pos[i] != (RecordPos{Offset: start + int64(p), Size: int32(k)}) {
				t.Fatalf("iter %d msg %d: position %+v, want %d/%d", iter, i, pos[i], start+int64(p), k)
			}
			p += k
		}
		be.PutUint32(want[message.FrameOffCRC:], message.EntryCRC(want))
		if !bytes.Equal(got, want) {
			t.Fatalf("iter %d: encoded entry differs from the reference encoding", iter)
		}
	}
}

func randBytes(rng *rand.Rand, n int) []byte {
	const alpha = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"
	b := make([]byte, n)
	for i := range b {
		b[i] = alpha[rng.Intn(len(alpha))]
	}
	return b
}
