package store

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/vfs"
)

// TestMembersRecovered: the member map (SetMember) is in the checkpoint's
// meta and rebuilt from the commitlog's command frames after a crash that
// no checkpoint covers; the last address of an id wins, and an id or
// address over the bound is refused before anything is written.
func TestMembersRecovered(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := smallConfig("/s")
	s := mustOpen(t, fsys, cfg)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.SetMember(header(1), "n1", "127.0.0.1:9001"))
	must(s.Flush()) // the checkpoint holds n1
	must(s.SetMember(header(2), "n2", "127.0.0.1:9002"))
	must(s.SetMember(header(3), "n1", "127.0.0.1:9011"))
	if err := s.SetMember(header(4), "n3", strings.Repeat("a", 1025)); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("an address over 1024 bytes: %v, want ErrBadCommand", err)
	}
	want := map[string]string{"n1": "127.0.0.1:9011", "n2": "127.0.0.1:9002"}
	if got := s.Members(); !maps.Equal(got, want) {
		t.Fatalf("live members %v, want %v", got, want)
	}
	crashed := crashImage(t, s, fsys)
	_ = s.Close()
	r := mustOpen(t, crashed, cfg)
	defer r.Close()
	if p := r.RecoveryPlan(); p.Entries < 2 {
		t.Fatalf("recovery replayed %d entries; the test needs the last two replayed", p.Entries)
	}
	if got := r.Members(); !maps.Equal(got, want) {
		t.Fatalf("members after abnormal recovery %v, want %v", got, want)
	}
	if idx, _ := r.Applied(); idx != 3 {
		t.Fatalf("applied %d after recovery, want 3", idx)
	}
}
