package message

import (
	"bytes"
	"math/rand"
	"testing"

	"github.com/raftmq/raftmq/internal/testseed"
)

// TestIndexedPropertiesMatchesGetProperty: the one-pass reader of the
// indexed properties (the append path's and recovery's) finds what
// GetProperty finds, on random property blocks with repeated, missing,
// empty and malformed pairs and stray separators.
func TestIndexedPropertiesMatchesGetProperty(t *testing.T) {
	rng := rand.New(rand.NewSource(testseed.Seed(t)))
	names := []string{PropertyTags, PropertyKeys, PropertyUniqKey, "TAG", "KEYSX", "", "a", "x\x01y"}
	values := []string{"", "v", "x y", "\x01", "\x02"}
	for iter := 0; iter < 20000; iter++ {
		var b []byte
		for n := rng.Intn(8); n > 0; n-- {
			b = append(b, names[rng.Intn(len(names))]...)
			if rng.Intn(8) != 0 {
				b = append(b, nameValueSep)
			}
			b = append(b, values[rng.Intn(len(values))]...)
			if n > 1 || rng.Intn(2) == 0 {
				b = append(b, propertySep)
			}
		}
		tags, keys, uniq := IndexedProperties(b)
		for _, c := range []struct {
			key string
			got []byte
		}{{PropertyTags, tags}, {PropertyKeys, keys}, {PropertyUniqKey, uniq}} {
			want, _ := GetProperty(b, c.key)
			if !bytes.Equal(c.got, want) {
				t.Fatalf("props %q key %s: got %q, want %q", b, c.key, c.got, want)
			}
		}
	}
}
