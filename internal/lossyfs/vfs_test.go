package lossyfs

import (
	"os"
	"testing"

	"github.com/raftmq/raftmq/vfs"
)

// TestVFSMkdirAllSurvivesPowerLoss: directories made by vfs.OS().MkdirAll,
// and a file fsynced in the deepest one with SyncDir, survive a power loss.
// os.MkdirAll alone does not make them durable (the raftmq node lost its
// raft/ directory this way after a whole-cluster power loss).
func TestVFSMkdirAllSurvivesPowerLoss(t *testing.T) {
	m := mount(t)
	fs := vfs.OS()
	must(t, fs.MkdirAll(m.path("a/b/c"), 0o755))
	f, err := fs.Create(m.path("a/b/c/f"))
	must(t, err)
	_, err = f.WriteAt([]byte("durable"), 0)
	must(t, err)
	must(t, f.Sync())
	must(t, f.Close())
	must(t, fs.SyncDir(m.path("a/b/c")))
	// The plain os.MkdirAll twin, with the same file treatment, is lost.
	must(t, os.MkdirAll(m.path("x/y"), 0o755))
	m.writeFile("x/y/f", []byte("lost"), true, true)

	rep := m.powerLoss(PowerLossOptions{})
	if got := m.content("a/b/c/f"); string(got) != "durable" {
		t.Fatalf("a/b/c/f = %q after power loss, want durable (report %v)", got, rep)
	}
	if _, err := os.Stat(m.path("x")); !os.IsNotExist(err) {
		t.Fatalf("x exists after power loss without a parent fsync (err %v): the test cannot tell durable from lucky", err)
	}
}
