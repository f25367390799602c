package lossyfs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestDaemonPowerLossOverSocket(t *testing.T) {
	requireFUSE(t)
	backing, mnt := t.TempDir(), t.TempDir()
	socket := filepath.Join(t.TempDir(), "control.sock")
	d, err := StartDaemon(backing, mnt, socket, testOptions(t))
	if err != nil {
		if os.Getenv("CI") != "true" && errors.Is(err, ErrNoAbort) {
			t.Skipf("SKIPPING lossyfs test: %v", err)
		}
		t.Fatalf("start daemon: %v", err)
	}
	defer func() {
		if err := d.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	m := &mounted{t: t, fs: d.FS(), dir: mnt}
	m.writeFile("kept", []byte("synced"), true, true)
	m.writeFile("lost", []byte("never synced"), false, false)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := Control(ctx, socket, Request{Op: OpStatus}); err != nil {
		t.Fatalf("status: %v", err)
	}
	rep, err := PowerLossVia(ctx, socket, PowerLossOptions{Seed: 1})
	if err != nil {
		t.Fatalf("power loss: %v", err)
	}
	t.Logf("power loss: %v", rep)
	if rep.DroppedBytes != SectorSize || rep.DroppedDirents != 1 {
		t.Fatalf("report %+v, want one sector and one dirent dropped", rep)
	}
	// The daemon mounted again on the same mountpoint.
	if got := m.content("kept"); string(got) != "synced" {
		t.Fatalf("kept = %q", got)
	}
	if m.content("lost") != nil {
		t.Fatalf("lost survived")
	}
	if _, err := Control(ctx, socket, Request{Op: "bogus"}); !errors.Is(err, ErrControl) {
		t.Fatalf("bogus op: %v, want ErrControl", err)
	}
	m.writeFile("late", []byte("clean shutdown keeps it"), false, false)
	if _, err := Control(ctx, socket, Request{Op: OpSync}); err != nil {
		t.Fatalf("sync: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(backing, "late")); err != nil || string(got) != "clean shutdown keeps it" {
		t.Fatalf("after sync, backing late = %q, %v", got, err)
	}
}
