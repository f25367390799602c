package meta

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/raftmq/raftmq/internal/testseed"
)

// TestProducersWindow walks the verdicts through a small window: in-order
// and out-of-order sequences, duplicates, too old once the window moved
// on, a jump past the whole window, a window resized by SetDedup, expiry.
func TestProducersWindow(t *testing.T) {
	ps := newProducers(DedupConfig{Window: 3, Expiry: 1000})
	id := []byte("p1")
	check := func(seq uint64, now int64, want Verdict) {
		t.Helper()
		if v := ps.Lookup(id, seq, now); v != want {
			t.Fatalf("Lookup(%d) at %d = %v, want %v", seq, now, v, want)
		}
	}
	check(10, 0, SeqNew)
	ps.Store(id, 10, 0)
	ps.Store(id, 12, 1)
	check(10, 2, SeqDuplicate)
	check(11, 2, SeqNew) // out of order: never stored
	check(13, 2, SeqNew)
	ps.Store(id, 11, 2)
	ps.Store(id, 13, 3) // the window is now 11..13
	check(10, 4, SeqTooOld)
	check(11, 4, SeqDuplicate)
	check(13, 4, SeqDuplicate)
	if seqs := ps.Sequences("p1"); !slices.Equal(seqs, []uint64{11, 12, 13}) {
		t.Fatalf("window %v", seqs)
	}
	ps.Store(id, 20, 5) // a jump past the whole window
	if seqs := ps.Sequences("p1"); !slices.Equal(seqs, []uint64{20}) {
		t.Fatalf("after a jump: window %v", seqs)
	}
	check(18, 5, SeqNew)
	check(17, 5, SeqTooOld)
	ps.Config.Window = 5 // SetDedup: the next Store resizes, keeping what it knows
	ps.Store(id, 19, 6)
	if seqs := ps.Sequences("p1"); !slices.Equal(seqs, []uint64{19, 20}) {
		t.Fatalf("after resizing: window %v", seqs)
	}
	check(16, 6, SeqNew)
	check(15, 6, SeqTooOld)
	check(20, 1006, SeqDuplicate) // last stored at 6: remembered until 1006
	check(20, 1007, SeqNew)       // expired: a new window
	check(1, 1007, SeqNew)
	ps.Store(id, 1, 1007)
	if seqs := ps.Sequences("p1"); !slices.Equal(seqs, []uint64{1}) {
		t.Fatalf("after expiry: window %v", seqs)
	}
	check(1, 1007, SeqDuplicate)
	check(2, 1007, SeqNew)
	if v := ps.Lookup([]byte("other"), 1, 1007); v != SeqNew {
		t.Fatalf("another producer: %v", v)
	}
}

// TestProducersNeverRefuseOutstanding: a producer keeping fewer than Window
// sequences outstanding, whose sends arrive in any order and are retried
// at random, gets every first arrival stored, every repeat answered as a
// duplicate, and nothing stored twice; a repeat arriving after the window
// moved past it is refused, never stored; the table after the run equals
// one rebuilt from the stored records alone (what recovery does) and one
// decoded from its encoding.
func TestProducersNeverRefuseOutstanding(t *testing.T) {
	rng := rand.New(rand.NewPCG(uint64(testseed.Seed(t)), 7))
	for round := 0; round < 50; round++ {
		window := 1 + rng.IntN(130)
		ps := newProducers(DedupConfig{Window: window, Expiry: 1 << 40})
		id := []byte("p")
		var stored []uint64
		isStored := map[uint64]bool{}
		var outstanding []uint64 // sent, not yet answered
		next := uint64(0)
		now := int64(0)
		for step := 0; step < 3000; step++ {
			now++
			for rng.IntN(3) != 0 && (len(outstanding) == 0 || next < slices.Min(outstanding)+uint64(window)) {
				outstanding = append(outstanding, next)
				next++
			}
			if len(outstanding) > 0 {
				i := rng.IntN(len(outstanding))
				seq := outstanding[i]
				switch ps.Lookup(id, seq, now) {
				case SeqNew:
					if isStored[seq] {
						t.Fatalf("round %d: seq %d stored twice", round, seq)
					}
					ps.Store(id, seq, now)
					stored = append(stored, seq)
					isStored[seq] = true
				case SeqDuplicate:
					if !isStored[seq] {
						t.Fatalf("round %d: seq %d answered as a duplicate, never stored", round, seq)
					}
				case SeqTooOld:
					t.Fatalf("round %d (window %d): outstanding seq %d refused as too old", round, window, seq)
				}
				if rng.IntN(4) != 0 { // answered; else lost: sent again later
					outstanding = slices.Delete(outstanding, i, i+1)
				}
			}
			if len(stored) > 0 && rng.IntN(10) == 0 { // a stray late repeat of anything stored
				seq := stored[rng.IntN(len(stored))]
				if v := ps.Lookup(id, seq, now); v == SeqNew {
					t.Fatalf("round %d: a repeat of stored seq %d would be stored again", round, seq)
				}
			}
		}
		replayed := newProducers(ps.Config)
		for _, seq := range stored {
			replayed.Store(id, seq, 0)
		}
		a, b := ps.Sequences("p"), replayed.Sequences("p")
		if !slices.Equal(a, b) {
			t.Fatalf("round %d: live window %v, replayed %v", round, a, b)
		}
		d := decoder{b: ps.appendProducers(nil)}
		decoded := d.producers()
		if c := decoded.Sequences("p"); d.err != nil || !slices.Equal(a, c) {
			t.Fatalf("round %d: decoded %v (%v), want %v", round, c, d.err, a)
		}
	}
}
