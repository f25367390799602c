package lossyfs

import (
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/raftmq/raftmq/internal/testseed"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/vfs"
)

// The install test stages a snapshot into a store on lossyfs the way a
// follower receives one (store.InstallSnapshot), lets the power go right
// after the install returned, and checks that the store opens with every
// entry. Found by the chaos suite (powerloss-all after
// kill-during-install-recv): the staged segments' directory was never
// fsynced, so the swapped-in store kept its checkpoint but lost its
// commitlog ("data missing below the checkpoint") and the node could not
// start.

// childStoreInstall builds a source store outside the mount with every
// entry flushed, installs its snapshot into dir (on the mount) and waits to
// be killed.
func childStoreInstall(dir string) error {
	seed := int64(envInt("LOSSYFS_SEED"))
	src, err := store.Open(vfs.OS(), storeConfig(os.Getenv("LOSSYFS_SRC")))
	if err != nil {
		return fmt.Errorf("open source: %w", err)
	}
	defer src.Close()
	for i := 1; i <= storeEntries; i++ {
		msg := message.Message{Topic: storeTopic, QueueID: 0, BornTimestamp: int64(i), Body: storeBody(seed, i)}
		res, err := src.AppendMessages(storeHeader(i), []message.Message{msg}, nil)
		if err == nil && res[0].Err != nil {
			err = res[0].Err
		}
		if err != nil {
			return fmt.Errorf("append %d: %w", i, err)
		}
	}
	if err := src.Flush(); err != nil {
		return err
	}
	snap := src.CaptureSnapshot()
	segs, err := src.SegmentFiles(snap.ConfirmOffset)
	if err != nil {
		return fmt.Errorf("segment files: %w", err)
	}
	var open *os.File
	next := func() (int64, io.Reader, bool, error) {
		if open != nil {
			_ = open.Close()
		}
		if len(segs) == 0 {
			return 0, nil, false, nil
		}
		seg := segs[0]
		segs = segs[1:]
		f, err := os.Open(seg.Path)
		if err != nil {
			return 0, nil, false, err
		}
		open = f
		return seg.Start, io.LimitReader(f, min(seg.Size, snap.ConfirmOffset-seg.Start)), true, nil
	}
	if err := store.InstallSnapshot(vfs.OS(), storeConfig(dir), snap, next); err != nil {
		return fmt.Errorf("install: %w", err)
	}
	fmt.Println("INSTALLED")
	block()
	return nil
}

func TestInstalledSnapshotSurvivesPowerLoss(t *testing.T) {
	seed := testseed.Seed(t)
	m := mount(t)
	dir := m.path("store")
	env := []string{"LOSSYFS_DIR=" + dir, "LOSSYFS_SRC=" + t.TempDir(), fmt.Sprintf("LOSSYFS_SEED=%d", seed),
		fmt.Sprintf("LOSSYFS_FLUSH_AT=%d", storeEntries)}
	w := startChild(t, "store-install", env...)
	w.expect("INSTALLED")
	w.kill()
	rep := m.powerLoss(PowerLossOptions{Seed: seed})
	v := startChild(t, "store-verify", env...)
	got := v.expect("RECOVERED")
	v.wait()
	t.Logf("seed %d: installed store recovered up to entry %s of %d; %v", seed, got, storeEntries, rep)
}
