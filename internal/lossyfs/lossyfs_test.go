package lossyfs

import (
	"bytes"
	"os"
	"testing"
)

func TestSyncedSurvivesUnsyncedDropped(t *testing.T) {
	m := mount(t)
	durable := bytes.Repeat([]byte("durable."), 1000) // 8000 bytes, two pages
	m.writeFile("a", durable, true, true)

	f, err := os.OpenFile(m.path("a"), os.O_RDWR, 0)
	must(t, err)
	_, err = f.WriteAt([]byte("VOLATILE"), 100) // overwrite
	must(t, err)
	_, err = f.WriteAt(bytes.Repeat([]byte("x"), 5000), 8000) // extend
	must(t, err)
	must(t, f.Close())
	if got := m.content("a"); len(got) != 13000 || string(got[100:108]) != "VOLATILE" {
		t.Fatalf("before power loss: len %d, content at 100 %q", len(got), got[100:108])
	}

	rep := m.powerLoss(PowerLossOptions{})
	if got := m.content("a"); !bytes.Equal(got, durable) {
		t.Fatalf("after power loss: got %d bytes, want the %d synced ones (at 100: %q)", len(got), len(durable), got[100:min(108, len(got))])
	}
	// 8 bytes in one sector, 5000 bytes in sectors 15..25 (8000..12999).
	if rep.DroppedBytes != 512+11*512 || rep.DroppedSizes != 1 || rep.Files != 1 || rep.DroppedDirents != 0 {
		t.Fatalf("report %+v", rep)
	}
}

func TestDirectoryEntriesFollowDirectoryFsync(t *testing.T) {
	m := mount(t)
	must(t, os.Mkdir(m.path("d"), 0o755))
	m.syncDir(".")
	m.writeFile("d/synced-dir", []byte("one"), true, true)   // file and dir fsynced
	m.writeFile("d/synced-file", []byte("two"), true, false) // only the file
	m.writeFile("d/nothing", []byte("three"), false, false)
	m.writeFile("old", []byte("four"), true, true)
	must(t, os.Mkdir(m.path("newdir"), 0o755)) // root not fsynced after
	must(t, os.Remove(m.path("old")))          // unlink, root not fsynced
	// A new directory fsynced itself, with a file fsynced in it, is still
	// unreachable: its parent was not fsynced.
	must(t, os.Mkdir(m.path("d/sub"), 0o755))
	m.writeFile("d/sub/f", []byte("five"), true, true)

	rep := m.powerLoss(PowerLossOptions{})
	if got := m.content("d/synced-dir"); string(got) != "one" {
		t.Errorf("d/synced-dir = %q, want one", got)
	}
	for _, name := range []string{"d/synced-file", "d/nothing", "newdir", "d/sub"} {
		if _, err := os.Stat(m.path(name)); !os.IsNotExist(err) {
			t.Errorf("%s exists after power loss (err %v); its directory was never fsynced", name, err)
		}
	}
	if got := m.content("old"); string(got) != "four" {
		t.Errorf("unlinked old = %q, want it back with four", got)
	}
	// synced-file, nothing, newdir, old, sub, sub/f
	if rep.DroppedDirents != 6 {
		t.Errorf("dropped dirents %d, want 6 (%+v)", rep.DroppedDirents, rep)
	}

	// A file's fsynced data is there once a later directory fsync makes
	// its name durable.
	m.writeFile("late", []byte("data"), true, false)
	f, err := os.OpenFile(m.path("late"), os.O_RDWR, 0)
	must(t, err)
	_, err = f.WriteAt([]byte("DATA-unsynced"), 0)
	must(t, err)
	must(t, f.Close())
	m.syncDir(".")
	m.powerLoss(PowerLossOptions{})
	if got := m.content("late"); string(got) != "data" {
		t.Errorf("late = %q, want data", got)
	}
}

func TestRenameAtomicity(t *testing.T) {
	m := mount(t)
	m.writeFile("cur", []byte("old content"), true, true)

	// The replace pattern without the directory fsync: old content, whole.
	m.writeFile("tmp", []byte("new content, longer"), true, false)
	must(t, os.Rename(m.path("tmp"), m.path("cur")))
	if got := m.content("cur"); string(got) != "new content, longer" {
		t.Fatalf("before power loss cur = %q", got)
	}
	m.powerLoss(PowerLossOptions{})
	if got := m.content("cur"); string(got) != "old content" {
		t.Fatalf("rename not fsynced: cur = %q, want the old content", got)
	}
	if m.content("tmp") != nil {
		t.Fatalf("tmp exists: its create was never fsynced")
	}

	// With the directory fsync: new content, tmp gone.
	m.writeFile("tmp", []byte("new content, longer"), true, false)
	must(t, os.Rename(m.path("tmp"), m.path("cur")))
	m.syncDir(".")
	m.powerLoss(PowerLossOptions{})
	if got := m.content("cur"); string(got) != "new content, longer" {
		t.Fatalf("rename fsynced: cur = %q, want the new content", got)
	}
	if m.content("tmp") != nil {
		t.Fatalf("tmp exists after a durable rename")
	}

	// Directory rename across directories: durable in the target only once
	// the target is fsynced.
	must(t, os.MkdirAll(m.path("a/sub"), 0o755))
	must(t, os.Mkdir(m.path("b"), 0o755))
	m.writeFile("a/sub/f", []byte("f"), true, true) // f durable in a/sub
	m.syncDir("a")                                  // sub durable in a
	m.syncDir(".")                                  // a, b durable
	must(t, os.Rename(m.path("a/sub"), m.path("b/sub2")))
	m.powerLoss(PowerLossOptions{})
	if string(m.content("a/sub/f")) != "f" || m.content("b/sub2/f") != nil {
		t.Fatalf("unsynced directory rename: a/sub/f %q, b/sub2/f %q", m.content("a/sub/f"), m.content("b/sub2/f"))
	}
	must(t, os.Rename(m.path("a/sub"), m.path("b/sub2")))
	m.syncDir("b")
	m.powerLoss(PowerLossOptions{})
	if m.content("a/sub/f") != nil || string(m.content("b/sub2/f")) != "f" {
		t.Fatalf("synced directory rename: a/sub/f %q, b/sub2/f %q", m.content("a/sub/f"), m.content("b/sub2/f"))
	}
}

func TestTruncateThenGrowReadsZeros(t *testing.T) {
	m := mount(t)
	m.writeFile("f", bytes.Repeat([]byte{0xAA}, 10000), true, true)
	must(t, os.Truncate(m.path("f"), 100))
	must(t, os.Truncate(m.path("f"), 10000))
	got := m.content("f")
	want := append(bytes.Repeat([]byte{0xAA}, 100), make([]byte, 9900)...)
	if !bytes.Equal(got, want) {
		t.Fatalf("truncate then grow: content differs")
	}
	f, err := os.OpenFile(m.path("f"), os.O_RDWR, 0)
	must(t, err)
	must(t, f.Sync())
	must(t, f.Close())
	m.powerLoss(PowerLossOptions{})
	if got := m.content("f"); !bytes.Equal(got, want) {
		t.Fatalf("after sync and power loss: content differs")
	}
}

func TestLenientDirsMakesTheNameDurable(t *testing.T) {
	m := mount(t)
	m.fs.lenientDirs = true
	must(t, os.MkdirAll(m.path("x/y"), 0o755))
	m.writeFile("x/y/f", []byte("f"), true, true)
	m.powerLoss(PowerLossOptions{})
	if got := m.content("x/y/f"); string(got) != "f" {
		t.Fatalf("x/y/f = %q with LenientDirs, want f", got)
	}
}
