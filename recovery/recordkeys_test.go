package recovery

import (
	"bytes"
	"math/rand"
	"testing"

	"github.com/raftmq/raftmq/internal/testseed"
	"github.com/raftmq/raftmq/message"
)

// TestRecordKeysMatchesGetProperty: the one-pass property walk of the
// replay finds what message.GetProperty finds, on random property blocks
// with repeated names, empty values, stray separators and missing ones.
func TestRecordKeysMatchesGetProperty(t *testing.T) {
	rng := rand.New(rand.NewSource(testseed.Seed(t)))
	parts := [][]byte{[]byte("KEYS"), []byte("TAGS"), []byte("UNIQ_KEY"), []byte("K"), []byte("a b"), {}, {0x01}, {0x02}, []byte("x\x01y")}
	for i := 0; i < 20000; i++ {
		var props []byte
		for n := rng.Intn(8); n > 0; n-- {
			props = append(props, parts[rng.Intn(len(parts))]...)
			if rng.Intn(4) > 0 {
				props = append(props, []byte{0x01, 0x02}[rng.Intn(2)])
			}
		}
		tags, keys, uniq := recordKeys(props)
		for _, c := range []struct {
			name string
			got  []byte
		}{{message.PropertyTags, tags}, {message.PropertyKeys, keys}, {message.PropertyUniqKey, uniq}} {
			want, _ := message.GetProperty(props, c.name)
			if !bytes.Equal(c.got, want) {
				t.Fatalf("props %q: %s = %q, GetProperty says %q", props, c.name, c.got, want)
			}
		}
	}
}
