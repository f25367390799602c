package remoting

import (
	"flag"
	"math/rand"
	"reflect"
	"testing"

	"github.com/raftmq/raftmq/internal/testseed"
)

var genCorpus = flag.Bool("gencorpus", false, "rewrite the fuzz seed corpora in testdata/fuzz")

// FuzzDecodeFrame: any payload decodes or fails with an error, never a
// panic; what decodes encodes again to a frame that decodes to the same
// command (after one round, which normalises unknown language names).
func FuzzDecodeFrame(f *testing.F) {
	f.Add([]byte{0, 0, 0, 2, '{', '}'})
	f.Fuzz(func(t *testing.T, payload []byte) {
		c, err := DecodeFrame(payload)
		if err != nil {
			return
		}
		once := roundTrip(t, c)
		if twice := roundTrip(t, once); !reflect.DeepEqual(once, twice) {
			t.Fatalf("not stable:\n%+v\n%+v", once, twice)
		}
	})
}

func roundTrip(t *testing.T, c *Command) *Command {
	t.Helper()
	frame, err := AppendFrame(nil, c)
	if err != nil {
		t.Fatalf("decoded command does not encode: %v", err)
	}
	got, err := DecodeFrame(frame[4:])
	if err != nil {
		t.Fatalf("encoded command does not decode: %v", err)
	}
	return got
}

// TestGenerateFuzzCorpus rewrites testdata/fuzz with -gencorpus.
func TestGenerateFuzzCorpus(t *testing.T) {
	if !*genCorpus {
		t.Skip("run with -gencorpus to rewrite the seed corpora")
	}
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 8; i++ {
		frame, err := AppendFrame(nil, randCommand(rng))
		if err != nil {
			t.Fatal(err)
		}
		testseed.WriteFuzzSeed(t, "FuzzDecodeFrame", i, frame[4:])
		testseed.WriteFuzzSeed(t, "FuzzDecodeFrame", 10+i, frame[4:len(frame)-1-i])
		body, err := AppendBatchMessage(nil, BatchMessage{Flag: rng.Int31(), Body: frame[4:], Properties: []byte("KEYS\x01k\x02")})
		if err != nil {
			t.Fatal(err)
		}
		testseed.WriteFuzzSeed(t, "FuzzDecodeBatch", i, body)
		testseed.WriteFuzzSeed(t, "FuzzDecodeBatch", 10+i, body[:len(body)-1-i])
	}
}
