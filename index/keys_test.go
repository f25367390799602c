package index

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/raftmq/raftmq/vfs"
)

// TestPutMessageKeysMatchesPutMessage: indexing the raw KEYS and UNIQ_KEY
// bytes writes exactly the files PutMessage writes for the split keys,
// including non-ASCII, invalid UTF-8, empty keys and runs of spaces.
func TestPutMessageKeysMatchesPutMessage(t *testing.T) {
	r := rand.New(rand.NewSource(testSeed(t)))
	pieces := []string{"k1", "order-7", "é", "日本", "😀x", "\xff", "a\x80b", "", " ", "  "}
	fs := vfs.NewMem()
	byStrings := openSvc(t, fs, "/strings", 7, 40, nil)
	byBytes := openSvc(t, fs, "/bytes", 7, 40, nil)
	phy, ts := int64(0), int64(1_700_000_000_000)
	for i := 0; i < 300; i++ {
		var raw []string
		for k := r.Intn(5); k > 0; k-- {
			raw = append(raw, pieces[r.Intn(len(pieces))]+fmt.Sprint(r.Intn(3)))
		}
		keysProp := strings.Join(raw, strings.Repeat(" ", 1+r.Intn(2)))
		if r.Intn(3) == 0 {
			keysProp = " " + keysProp + " "
		}
		uniq := ""
		if r.Intn(4) > 0 {
			uniq = pieces[r.Intn(len(pieces))] + fmt.Sprint(i)
		}
		topic := []string{"T", "tópico", "T2"}[r.Intn(3)]
		if err := byStrings.PutMessage(topic, strings.Fields(keysProp), uniq, phy, ts); err != nil {
			t.Fatal(err)
		}
		if err := byBytes.PutMessageKeys([]byte(topic), []byte(keysProp), []byte(uniq), phy, ts); err != nil {
			t.Fatal(err)
		}
		phy += 1 + int64(r.Intn(200))
		ts += int64(r.Intn(1500))
	}
	for _, s := range []*Service{byStrings, byBytes} {
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	compareDirs(t, "PutMessageKeys vs PutMessage", dirBytes(t, fs, "/bytes"), dirBytes(t, fs, "/strings"))
	if n := len(byBytes.Files()); n < 2 {
		t.Fatalf("only %d index files: the test should roll", n)
	}
}

func TestJavaHashBytes(t *testing.T) {
	for _, s := range []string{"", "abc", "topic#key", "é", "日本語", "😀", "\xff\xfe", "a\x80", string(utf8.RuneError)} {
		if got, want := javaHashBytes(0, []byte(s)), JavaHashCode(s); got != want {
			t.Errorf("javaHashBytes(%q) = %d, JavaHashCode = %d", s, got, want)
		}
		if got, want := javaHashBytes(javaHashBytes(0, []byte("T#")), []byte(s)), JavaHashCode("T#"+s); got != want {
			t.Errorf("continued hash of %q = %d, want %d", s, got, want)
		}
	}
}

// BenchmarkPutMessageKeys is BenchmarkPutMessage's index case through the
// allocation-free byte API, with the string API beside it.
func BenchmarkPutMessageKeys(b *testing.B) {
	run := func(b *testing.B, put func(s *Service, i int) error) {
		s, err := Open(vfs.OS(), Config{Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := put(s, i); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	}
	topic := []byte("bench")
	b.Run("bytes", func(b *testing.B) {
		var key, uniq []byte
		run(b, func(s *Service, i int) error {
			key = append(key[:0], benchKey(i)...)
			uniq = append(uniq[:0], benchUniq(i)...)
			return s.PutMessageKeys(topic, key, uniq, int64(i)*200, benchBase+int64(i))
		})
	})
	b.Run("strings", func(b *testing.B) {
		keys := make([]string, 1)
		run(b, func(s *Service, i int) error {
			keys[0] = benchKey(i)
			return s.PutMessage("bench", keys, benchUniq(i), int64(i)*200, benchBase+int64(i))
		})
	})
}
