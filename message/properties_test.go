package message

import (
	"bytes"
	"errors"
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
	names := []string{PropertyTags, PropertyKeys, PropertyUniqKey, PropertyProducerSeq, "TAG", "KEYSX", "", "a", "x\x01y"}
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
		sp := ReadStoreProperties(b)
		for _, c := range []struct {
			key string
			got []byte
		}{{PropertyTags, sp.Tags}, {PropertyKeys, sp.Keys}, {PropertyUniqKey, sp.Uniq}, {PropertyProducerSeq, sp.ProducerSeq}} {
			want, _ := GetProperty(b, c.key)
			if !bytes.Equal(c.got, want) {
				t.Fatalf("props %q key %s: got %q, want %q", b, c.key, c.got, want)
			}
		}
	}
}

// TestParseProducerSeq: one spelling per (producer, sequence); everything
// else is ErrBadProducerSeq.
func TestParseProducerSeq(t *testing.T) {
	for _, c := range []struct {
		in       string
		producer string
		seq      uint64
	}{
		{"p:0", "p", 0}, {"A1B2:18446744073709551615", "A1B2", 1<<64 - 1}, {"a:b:7", "a:b", 7},
		{string(bytes.Repeat([]byte("x"), MaxProducerIDBytes)) + ":1", string(bytes.Repeat([]byte("x"), MaxProducerIDBytes)), 1},
	} {
		p, seq, err := ParseProducerSeq([]byte(c.in))
		if err != nil || string(p) != c.producer || seq != c.seq {
			t.Errorf("%q: %q %d %v", c.in, p, seq, err)
		}
		if got := string(AppendProducerSeq(nil, c.producer, c.seq)); got != c.in {
			t.Errorf("AppendProducerSeq(%q, %d) = %q", c.producer, c.seq, got)
		}
	}
	for _, in := range []string{"", ":1", "p", "p:", "p:01", "p:-1", "p:+1", "p:1a", "p: 1", "p:18446744073709551616",
		"p:99999999999999999999", string(bytes.Repeat([]byte("x"), MaxProducerIDBytes+1)) + ":1"} {
		if _, _, err := ParseProducerSeq([]byte(in)); !errors.Is(err, ErrBadProducerSeq) {
			t.Errorf("%q: err %v", in, err)
		}
	}
}

// FuzzParseProducerSeq: never panics; what parses prints back to itself.
func FuzzParseProducerSeq(f *testing.F) {
	for _, s := range []string{"p:0", "A1B2C3D4E5F60718:42", "p:01", ":", "a:b:18446744073709551615"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		p, seq, err := ParseProducerSeq(in)
		if err != nil {
			return
		}
		if got := AppendProducerSeq(nil, string(p), seq); !bytes.Equal(got, in) {
			t.Fatalf("%q parsed as %q %d, prints %q", in, p, seq, got)
		}
	})
}
