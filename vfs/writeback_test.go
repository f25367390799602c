package vfs

import (
	"bytes"
	"math/rand"
	"slices"
	"testing"

	"github.com/raftmq/raftmq/internal/testseed"
)

// TestCrashCloneWriteback: the dirty pages of an attached mapping survive
// a crash whole under KeepUnsynced, each with some chance otherwise (torn
// only at sector boundaries), never without Writeback or once detached.
func TestCrashCloneWriteback(t *testing.T) {
	const size = 8 * TearPage
	m := NewMem()
	f, err := m.Create("seg")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, size), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncDir("."); err != nil {
		t.Fatal(err)
	}
	view := make([]byte, size)
	dirty := []int{1, 3, 6}
	for _, p := range dirty {
		for i := p * TearPage; i < (p+1)*TearPage; i++ {
			view[i] = byte(1 + i%251)
		}
	}
	detach := f.(*memFile).AttachMapping(func() []byte { return view })
	content := func(opts CrashOptions) []byte {
		t.Helper()
		b, err := m.CrashClone(opts).ReadFile("seg")
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if got := content(CrashOptions{Mode: KeepUnsynced, Writeback: true}); !bytes.Equal(got, view) {
		t.Fatal("kill -9 (KeepUnsynced with Writeback) lost dirty mapped pages")
	}
	if got := content(CrashOptions{Mode: KeepUnsynced}); !bytes.Equal(got, make([]byte, size)) {
		t.Fatal("without Writeback a mapping's pages reached the file")
	}
	rng := rand.New(rand.NewSource(testseed.Seed(t)))
	var kept, lost, torn int
	for range 200 {
		got := content(CrashOptions{Mode: DropUnsynced, Writeback: true, Rand: rng})
		for p := 0; p < size/TearPage; p++ {
			if !slices.Contains(dirty, p) {
				if !bytes.Equal(got[p*TearPage:(p+1)*TearPage], make([]byte, TearPage)) {
					t.Fatalf("clean page %d changed", p)
				}
				continue
			}
			page, want := got[p*TearPage:(p+1)*TearPage], view[p*TearPage:(p+1)*TearPage]
			newSectors := 0
			for s := 0; s < TearPage; s += Sector {
				switch sec := page[s : s+Sector]; {
				case bytes.Equal(sec, want[s:s+Sector]):
					newSectors++
				case !bytes.Equal(sec, make([]byte, Sector)):
					t.Fatalf("page %d sector %d is neither old nor new: torn inside a sector", p, s/Sector)
				}
			}
			switch {
			case newSectors == TearPage/Sector:
				kept++
			case newSectors == 0:
				lost++
			default:
				torn++
			}
		}
	}
	if kept == 0 || lost == 0 || torn == 0 {
		t.Fatalf("dirty pages over 200 crashes: %d kept, %d lost, %d torn; want some of each", kept, lost, torn)
	}
	detach()
	if got := content(CrashOptions{Mode: KeepUnsynced, Writeback: true}); !bytes.Equal(got, make([]byte, size)) {
		t.Fatal("a detached mapping still reached the file")
	}
}
