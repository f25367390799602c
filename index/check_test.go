package index

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/raftmq/raftmq/vfs"
)

// Files loaded from disk are checked by the first query that reads them,
// the older ones without the service lock: queries, puts, retention and
// Close run side by side (under -race), no query sees a false corruption
// error, and a query after Close gets ErrClosed.
func TestCheckBesideWritersAndRetention(t *testing.T) {
	fs := vfs.NewMem()
	s := openSvc(t, fs, "/idx", 7, 16, nil)
	var ms []msg
	for i := range 200 {
		ms = append(ms, msg{keys: []string{fmt.Sprintf("k%d", i)}, phy: int64(100 * (i + 1)), ts: int64(1000 * (i + 1))})
	}
	putAll(t, s, ms)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openSvc(t, fs, "/idx", 7, 16, nil)
	if len(s.Files()) < 10 {
		t.Fatalf("%d files, want many", len(s.Files()))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < 200; i += 4 {
				if _, err := s.Query("T", fmt.Sprintf("k%d", i), 4, 0, math.MaxInt64); err != nil && !errors.Is(err, ErrClosed) {
					errs <- fmt.Errorf("k%d: %w", i, err)
					return
				}
			}
		}()
	}
	for i := range 100 {
		if err := s.PutMessage("T", []string{fmt.Sprintf("n%d", i)}, "", int64(100*(201+i)), int64(1000*(201+i))); err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			if _, err := s.DeleteBelow(int64(100 * (i + 1))); err != nil {
				t.Fatal(err)
			}
		}
	}
	s.Close()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if _, err := s.Query("T", "k1", 4, 0, math.MaxInt64); !errors.Is(err, ErrClosed) {
		t.Fatalf("query after Close: %v, want ErrClosed", err)
	}
}

// A damaged file fails every query that reads it, with the same error,
// and is not checked again.
func TestCheckDamageIsSticky(t *testing.T) {
	fs := vfs.NewMem()
	s := openSvc(t, fs, "/idx", 7, 64, nil)
	putAll(t, s, []msg{{keys: []string{"a"}, phy: 100, ts: 1000}, {keys: []string{"b"}, phy: 200, ts: 2000}, {keys: []string{"c"}, phy: 300, ts: 3000}})
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	files, err := fs.List("/idx")
	if err != nil || len(files) != 1 {
		t.Fatalf("files %v %v", files, err)
	}
	lay := layout{slots: 7, indexes: 64}
	if err := fs.FlipBit("/idx/"+files[0], int64(lay.entryPos(2)), 1); err != nil { // entry 2's keyHash
		t.Fatal(err)
	}
	s = openSvc(t, fs, "/idx", 7, 64, nil)
	_, first := s.Query("T", "a", 4, 0, math.MaxInt64)
	_, again := s.Query("T", "c", 4, 0, math.MaxInt64)
	if !errors.Is(first, ErrCorrupt) || again == nil || again.Error() != first.Error() {
		t.Fatalf("queries of a damaged file: %v, then %v; want the same ErrCorrupt", first, again)
	}
}
