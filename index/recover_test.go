package index

import (
	"fmt"
	"math/rand"
	"path/filepath"
	"testing"

	"github.com/raftmq/raftmq/vfs"
)

// TestRecoverToMatchesRebuild: after a crash that loses an arbitrary part
// of what was indexed after the checkpoint (entries torn or zero, slots
// pointing at them), RecoverTo leaves exactly the bytes of an index that
// only ever held the checkpointed messages.
func TestRecoverToMatchesRebuild(t *testing.T) {
	r := rand.New(rand.NewSource(testSeed(t)))
	for iter := 0; iter < 30; iter++ {
		msgs := randMsgs(r, 20+r.Intn(60), true)
		cut := 1 + r.Intn(len(msgs)-1)
		slots := 1 + r.Intn(9)
		name := fmt.Sprintf("iter %d (%d msgs, checkpoint after %d, %d slots)", iter, len(msgs), cut, slots)
		recoverToMatchesRebuild(t, r, vfs.NewMem(), "/", name, msgs, cut, slots, 1000)
	}
}

// TestRecoverToMatchesRebuildInChunks is TestRecoverToMatchesRebuild on OS
// files, where RecoverTo reads slots and entries with pread in chunks
// (recoverChunk), with more of each than one chunk holds.
func TestRecoverToMatchesRebuildInChunks(t *testing.T) {
	r := rand.New(rand.NewSource(testSeed(t)))
	msgs := randMsgs(r, 60000, true)
	cut := len(msgs) - 1 - r.Intn(len(msgs)/10)
	slots := 2*recoverChunk/SlotSize + r.Intn(1000)
	name := fmt.Sprintf("%d msgs, checkpoint after %d, %d slots", len(msgs), cut, slots)
	// One file (RecoverTo reads only the newest) with more checkpointed
	// entries than two chunks hold.
	if st := recoverToMatchesRebuild(t, r, vfs.OS(), t.TempDir(), name, msgs, cut, slots, 400000); int(st.IndexCount) <= 2*recoverChunk/EntrySize {
		t.Fatalf("%s: %d entries checkpointed, want more than two chunks (%d)", name, st.IndexCount, 2*recoverChunk/EntrySize)
	}
}

// recoverToMatchesRebuild runs one case and returns the checkpointed state.
func recoverToMatchesRebuild(t *testing.T, r *rand.Rand, fs vfs.FS, root, name string, msgs []msg, cut, slots, indexes int) State {
	t.Helper()
	crashedDir, rebuiltDir := filepath.Join(root, "crashed"), filepath.Join(root, "rebuilt")
	crashed := openSvc(t, fs, crashedDir, slots, indexes, nil)
	putAll(t, crashed, msgs[:cut])
	if err := crashed.Flush(); err != nil {
		t.Fatal(err)
	}
	st := crashed.State()
	putAll(t, crashed, msgs[cut:]) // the tail after the checkpoint
	f := crashed.newest()
	b := f.bytes()
	for n := int(st.IndexCount); n < int(f.hdr.IndexCount); n++ { // lose part of the tail
		p := f.lay.entryPos(n)
		switch r.Intn(3) {
		case 0:
			clear(b[p : p+EntrySize])
		case 1:
			clear(b[p+r.Intn(EntrySize) : p+EntrySize])
		}
	}
	if err := crashed.RecoverTo(st); err != nil {
		t.Fatalf("%s: %v", name, err)
	}

	rebuilt := openSvc(t, fs, rebuiltDir, slots, indexes, nil)
	putAll(t, rebuilt, msgs[:cut])
	for _, s := range []*Service{crashed, rebuilt} {
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	compareDirs(t, name, dirBytes(t, fs, crashedDir), dirBytes(t, fs, rebuiltDir))
	return st
}
