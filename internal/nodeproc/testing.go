package nodeproc

import (
	"os"
	"testing"
)

// TempDir makes a directory for data dirs and logs that is removed when the
// test passes and kept (its path logged) when it fails. Register it before
// the cluster's Stop cleanup so that Stop runs first.
func TempDir(t testing.TB, name string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "raftmq-"+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kept data dirs and node logs in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	return dir
}
