package index

import (
	"errors"
	"math"
	"testing"

	"github.com/raftmq/raftmq/vfs"
)

// FuzzOpenQuery: an index file holding arbitrary bytes either opens or is
// rejected with an error; once open, Query answers or reports ErrCorrupt
// (its slots and chains do not check), and Query, TruncateAbove and
// PutMessage never panic or loop.
func FuzzOpenQuery(f *testing.F) {
	const slots, indexes = 4, 8
	seed := make([]byte, FileSize(slots, indexes))
	Header{BeginTimestamp: 1000, EndTimestamp: 3000, EndPhyOffset: 20, HashSlotCount: 1, IndexCount: 3}.Encode(seed)
	seed[HeaderSize+3] = 2
	f.Add(seed, "k", int64(10))
	f.Add([]byte{}, "", int64(0))
	f.Fuzz(func(t *testing.T, data []byte, key string, phy int64) {
		fs := vfs.NewMem()
		if err := fs.MkdirAll("/idx", 0o755); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, FileSize(slots, indexes))
		copy(b, data)
		file, err := fs.Create("/idx/" + FileName(1000))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := file.WriteAt(b, 0); err != nil {
			t.Fatal(err)
		}
		file.Close()
		s, err := Open(fs, Config{Dir: "/idx", MaxHashSlots: slots, MaxIndexes: indexes})
		if err != nil {
			return
		}
		defer s.Close()
		got, err := s.Query("T", key, 100, math.MinInt64, math.MaxInt64)
		if err != nil && !errors.Is(err, ErrCorrupt) || len(got) >= indexes {
			t.Fatalf("query: %v, %v", got, err)
		}
		_ = s.TruncateAbove(phy)
		_ = s.PutMessage("T", []string{key}, "u", max(phy, 0), 5000)
		_, _ = s.Query("T", key, 100, 0, math.MaxInt64)
	})
}
