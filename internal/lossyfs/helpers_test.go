package lossyfs

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// requireFUSE skips (loudly) without root or /dev/fuse, and fails instead
// when CI=true.
func requireFUSE(t testing.TB) {
	t.Helper()
	why := ""
	if os.Geteuid() != 0 {
		why = "not root"
	} else if _, err := os.Stat("/dev/fuse"); err != nil {
		why = "no /dev/fuse: " + err.Error()
	}
	if why == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("lossyfs tests need root and /dev/fuse (%s), and CI=true", why)
	}
	t.Skipf("SKIPPING lossyfs test: needs root and /dev/fuse (%s)", why)
}

type mounted struct {
	t   testing.TB
	fs  *FS
	dir string // mountpoint
}

func testOptions(t testing.TB) Options {
	return Options{Logger: hclog.New(&hclog.LoggerOptions{Output: testWriter{t}, Level: hclog.Info})}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", bytes.TrimRight(p, "\n"))
	return len(p), nil
}

// mount mounts a fresh backing directory; cleanup unmounts whatever is
// mounted then.
func mount(t testing.TB) *mounted {
	t.Helper()
	requireFUSE(t)
	backing, mnt := t.TempDir(), t.TempDir()
	f, err := Mount(backing, mnt, testOptions(t))
	if err != nil {
		if os.Getenv("CI") != "true" && errors.Is(err, ErrNoAbort) {
			t.Skipf("SKIPPING lossyfs test: %v", err)
		}
		t.Fatalf("mount: %v", err)
	}
	m := &mounted{t: t, fs: f, dir: mnt}
	t.Cleanup(func() {
		if err := m.fs.Unmount(); err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("unmount: %v", err)
		}
	})
	return m
}

func (m *mounted) path(name string) string { return filepath.Join(m.dir, name) }

// powerLoss loses power and mounts again.
func (m *mounted) powerLoss(opts PowerLossOptions) Report {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := m.fs.PowerLoss(ctx, opts)
	if err != nil {
		m.t.Fatalf("power loss: %v", err)
	}
	m.t.Logf("power loss: %v", rep)
	f, err := m.fs.MountAgain(testOptions(m.t))
	if err != nil {
		m.t.Fatalf("mount again: %v", err)
	}
	m.fs = f
	return rep
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// writeFile creates name with data; syncFile fsyncs it, syncDir its
// directory.
func (m *mounted) writeFile(name string, data []byte, syncFile, syncDir bool) {
	m.t.Helper()
	f, err := os.OpenFile(m.path(name), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	must(m.t, err)
	_, err = f.Write(data)
	must(m.t, err)
	if syncFile {
		must(m.t, f.Sync())
	}
	must(m.t, f.Close())
	if syncDir {
		m.syncDir(filepath.Dir(name))
	}
}

func (m *mounted) syncDir(name string) {
	m.t.Helper()
	d, err := os.Open(m.path(name))
	must(m.t, err)
	must(m.t, d.Sync())
	must(m.t, d.Close())
}

// content returns the file's content, or nil if it does not exist.
func (m *mounted) content(name string) []byte {
	m.t.Helper()
	b, err := os.ReadFile(m.path(name))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	must(m.t, err)
	return b
}
