package lossyfs

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

const mmapPages = 4

// childMmap writes pages 0 and 2 of a shared mapping and msyncs them,
// writes pages 1 and 3 without msync, and waits to be killed.
func childMmap(name string) error {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	data, err := unix.Mmap(int(f.Fd()), 0, mmapPages*PageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return err
	}
	for _, i := range []int{0, 2} {
		copy(data[i*PageSize:], fmt.Sprintf("synced page %d", i))
		if err := unix.Msync(data[i*PageSize:(i+1)*PageSize], unix.MS_SYNC); err != nil {
			return fmt.Errorf("msync: %w", err)
		}
	}
	for _, i := range []int{1, 3} {
		copy(data[i*PageSize:], fmt.Sprintf("unsynced page %d", i))
	}
	fmt.Println("READY")
	block()
	return nil
}

func TestMmapMsyncSurvivesUnsyncedDropped(t *testing.T) {
	m := mount(t)
	m.writeFile("m", make([]byte, mmapPages*PageSize), true, true)
	c := startChild(t, "mmap", "LOSSYFS_FILE="+m.path("m"))
	c.expect("READY")
	// Through the mount the unsynced pages are visible before the loss.
	if got := m.content("m"); !bytes.HasPrefix(got[PageSize:], []byte("unsynced page 1")) {
		t.Fatalf("page 1 before power loss: %q", got[PageSize:PageSize+16])
	}
	c.kill()
	rep := m.powerLoss(PowerLossOptions{})
	got := m.content("m")
	if len(got) != mmapPages*PageSize {
		t.Fatalf("size %d after power loss", len(got))
	}
	for i := range mmapPages {
		pg := got[i*PageSize : (i+1)*PageSize]
		want := make([]byte, PageSize)
		if i%2 == 0 {
			copy(want, fmt.Sprintf("synced page %d", i))
		}
		if !bytes.Equal(pg, want) {
			t.Errorf("page %d after power loss starts %q, want %q", i, pg[:20], want[:20])
		}
	}
	// The unsynced pages reached lossyfs (read above, or write-back at the
	// power loss) and were dropped: one sector each.
	if rep.DroppedPages != 2 || rep.DroppedBytes != 2*SectorSize || rep.Files != 1 {
		t.Errorf("report %+v, want 2 dropped pages of one sector", rep)
	}
}
