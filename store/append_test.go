package store

import (
	"bytes"
	"math/rand"
	"testing"

	"github.com/raftmq/raftmq/message"
)

// TestReadStorePropsMatchesGetProperty: the one-pass property reader of the
// append path finds what message.GetProperty finds, on random property
// blocks with repeated, missing, empty and malformed pairs.
func TestReadStorePropsMatchesGetProperty(t *testing.T) {
	rng := rand.New(rand.NewSource(testSeed(t)))
	keys := []string{message.PropertyTags, message.PropertyKeys, message.PropertyUniqKey, "TAG", "KEYSX", "", "a"}
	for iter := 0; iter < 5000; iter++ {
		var b []byte
		for n := rng.Intn(6); n > 0; n-- {
			b = append(b, keys[rng.Intn(len(keys))]...)
			if rng.Intn(8) != 0 {
				b = append(b, 0x01)
			}
			b = append(b, []string{"", "v", "x y", "\x01"}[rng.Intn(4)]...)
			if n > 1 || rng.Intn(2) == 0 {
				b = append(b, 0x02)
			}
		}
		sp := readStoreProps(b)
		for _, c := range []struct {
			key string
			got []byte
		}{{message.PropertyTags, sp.tags}, {message.PropertyKeys, sp.keys}, {message.PropertyUniqKey, sp.uniq}} {
			want, _ := message.GetProperty(b, c.key)
			if !bytes.Equal(c.got, want) {
				t.Fatalf("props %q key %s: got %q, want %q", b, c.key, c.got, want)
			}
		}
	}
}
