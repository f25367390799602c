package index

import (
	"fmt"
	"math/rand"
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
		fs := vfs.NewMem()

		crashed := openSvc(t, fs, "/crashed", slots, 1000, nil)
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

		rebuilt := openSvc(t, fs, "/rebuilt", slots, 1000, nil)
		putAll(t, rebuilt, msgs[:cut])
		for _, s := range []*Service{crashed, rebuilt} {
			if err := s.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		compareDirs(t, name, dirBytes(t, fs, "/crashed"), dirBytes(t, fs, "/rebuilt"))
	}
}
