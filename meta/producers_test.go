package meta

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/raftmq/raftmq/internal/testseed"
)

// TestProducersWindow walks the verdicts through a small window: in-order
// and out-of-order sequences, duplicates with their offsets, the floor
// after eviction, expiry.
func TestProducersWindow(t *testing.T) {
	ps := newProducers(DedupConfig{Window: 3, Expiry: 1000})
	id := []byte("p1")
	check := func(seq uint64, now int64, want Verdict, wantOff int64) {
		t.Helper()
		v, off := ps.Lookup(id, seq, now)
		if v != want || (v == SeqDuplicate && off != wantOff) {
			t.Fatalf("Lookup(%d) = %v, %d; want %v, %d", seq, v, off, want, wantOff)
		}
	}
	check(10, 0, SeqNew, 0)
	ps.Store(id, 10, 100, 0)
	ps.Store(id, 12, 120, 1)
	check(10, 2, SeqDuplicate, 100)
	check(11, 2, SeqNew, 0) // out of order: never stored
	ps.Store(id, 11, 110, 2)
	ps.Store(id, 13, 130, 3) // evicts 10
	check(10, 4, SeqTooOld, 0)
	check(11, 4, SeqDuplicate, 110)
	check(13, 4, SeqDuplicate, 130)
	if seqs, floor := ps.Sequences("p1"); !slices.Equal(seqs, []uint64{11, 12, 13}) || floor != 11 {
		t.Fatalf("window %v floor %d", seqs, floor)
	}
	ps.Store(id, 5, 50, 5) // below a full window: stored, not kept
	check(5, 5, SeqTooOld, 0)
	check(13, 1005, SeqDuplicate, 130) // last stored at 5: remembered until 1005
	check(13, 1006, SeqNew, 0)         // expired: a new window
	check(10, 1006, SeqNew, 0)
	ps.Store(id, 1, 10, 1006)
	if seqs, floor := ps.Sequences("p1"); !slices.Equal(seqs, []uint64{1}) || floor != 0 {
		t.Fatalf("after expiry: window %v floor %d", seqs, floor)
	}
	check(1, 1006, SeqDuplicate, 10)
	check(2, 1006, SeqNew, 0)
	if v, _ := ps.Lookup([]byte("other"), 1, 1006); v != SeqNew {
		t.Fatalf("another producer: %v", v)
	}
}

// TestProducersNeverRefuseOutstanding: a producer keeping fewer than Window
// sequences outstanding, whose sends arrive in any order and are retried
// at random, gets every first arrival stored, every repeat answered as a
// duplicate of it, and nothing stored twice; the table after the run
// equals one rebuilt from the stored records alone (what recovery does)
// and one decoded from its encoding.
func TestProducersNeverRefuseOutstanding(t *testing.T) {
	rng := rand.New(rand.NewPCG(uint64(testseed.Seed(t)), 7))
	for round := 0; round < 50; round++ {
		window := 1 + rng.IntN(64)
		ps := newProducers(DedupConfig{Window: window, Expiry: 1 << 40})
		id := []byte("p")
		type rec struct {
			seq uint64
			off int64
		}
		var stored []rec
		storedAt := map[uint64]int64{}
		var outstanding []uint64 // sent, not yet answered
		next := uint64(0)
		now := int64(0)
		for step := 0; step < 2000; step++ {
			now++
			// Send new sequences while the window allows.
			for rng.IntN(3) != 0 && (len(outstanding) == 0 || next < slices.Min(outstanding)+uint64(window)) {
				outstanding = append(outstanding, next)
				next++
			}
			if len(outstanding) == 0 {
				continue
			}
			i := rng.IntN(len(outstanding))
			seq := outstanding[i]
			switch v, off := ps.Lookup(id, seq, now); v {
			case SeqNew:
				if _, dup := storedAt[seq]; dup {
					t.Fatalf("round %d: seq %d stored twice", round, seq)
				}
				o := int64(len(stored)) * 10
				ps.Store(id, seq, o, now)
				stored = append(stored, rec{seq, o})
				storedAt[seq] = o
			case SeqDuplicate:
				if storedAt[seq] != off {
					t.Fatalf("round %d: seq %d: duplicate of %d, stored at %d", round, seq, off, storedAt[seq])
				}
			case SeqTooOld:
				t.Fatalf("round %d (window %d): outstanding seq %d refused as too old", round, window, seq)
			}
			if rng.IntN(4) != 0 { // answered; else lost: sent again later
				outstanding = slices.Delete(outstanding, i, i+1)
			}
		}
		replayed := newProducers(ps.Config)
		for _, r := range stored {
			replayed.Store(id, r.seq, r.off, 0)
		}
		a, _ := ps.Sequences("p")
		b, _ := replayed.Sequences("p")
		if !slices.Equal(a, b) {
			t.Fatalf("round %d: live window %v, replayed %v", round, a, b)
		}
		d := decoder{b: ps.appendProducers(nil)}
		decoded := d.producers()
		c, _ := decoded.Sequences("p")
		if d.err != nil || !slices.Equal(a, c) {
			t.Fatalf("round %d: decoded %v (%v), want %v", round, c, d.err, a)
		}
	}
}
