package lossyfs

import (
	"bytes"
	"os"
	"testing"

	"github.com/raftmq/raftmq/internal/testseed"
)

const tornPages = 64

// tornRun overwrites a durable file of 0x11 with 0x22 without syncing and
// loses power with Torn and seed; it returns the surviving content.
func tornRun(t *testing.T, seed int64) ([]byte, Report) {
	m := mount(t)
	m.writeFile("f", bytes.Repeat([]byte{0x11}, tornPages*PageSize), true, true)
	f, err := os.OpenFile(m.path("f"), os.O_RDWR, 0)
	must(t, err)
	_, err = f.WriteAt(bytes.Repeat([]byte{0x22}, tornPages*PageSize), 0)
	must(t, err)
	_, err = f.WriteAt([]byte("past the durable size"), tornPages*PageSize)
	must(t, err)
	must(t, f.Close())
	rep := m.powerLoss(PowerLossOptions{Seed: seed, Torn: true})
	got := m.content("f")
	if len(got) != tornPages*PageSize {
		t.Fatalf("size %d, want the durable %d", len(got), tornPages*PageSize)
	}
	sectors := 0
	for s := 0; s < len(got); s += SectorSize {
		switch sec := got[s : s+SectorSize]; {
		case bytes.Equal(sec, bytes.Repeat([]byte{0x22}, SectorSize)):
			sectors++
		case !bytes.Equal(sec, bytes.Repeat([]byte{0x11}, SectorSize)):
			t.Fatalf("sector at %d is neither old nor new: torn inside a sector", s)
		}
	}
	if sectors != rep.PersistedSectors {
		t.Fatalf("%d new sectors on disk, report says %d persisted", sectors, rep.PersistedSectors)
	}
	return got, rep
}

func TestTornPowerLossIsDeterministic(t *testing.T) {
	seed := testseed.Seed(t)
	a, ra := tornRun(t, seed)
	b, rb := tornRun(t, seed)
	c, _ := tornRun(t, seed+1)
	if !bytes.Equal(a, b) || ra != rb {
		t.Fatalf("same seed, different outcome: %v vs %v", ra, rb)
	}
	if bytes.Equal(a, c) {
		t.Fatalf("seeds %d and %d persisted the same sectors", seed, seed+1)
	}
	all := tornPages * PageSize / SectorSize
	if ra.PersistedSectors == 0 || ra.PersistedSectors == all || ra.TornPages == 0 || ra.DroppedPages == 0 {
		t.Fatalf("torn power loss persisted all or nothing: %v", ra)
	}
	// One dirty sector past the durable size is lost whatever the seed.
	if ra.DroppedBytes != int64(all-ra.PersistedSectors+1)*SectorSize || ra.DroppedSizes != 1 {
		t.Fatalf("report %v: dropped bytes do not add up", ra)
	}
}
