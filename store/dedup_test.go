package store

import (
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/vfs"
)

// seqMessage is testMessage n with PSEQ "producer:seq".
func seqMessage(t *testing.T, producer string, seq uint64, n int) message.Message {
	t.Helper()
	m := testMessage("dedup", int32(n%4), n, nil)
	props, err := message.EncodeProperties(
		message.Property{Key: message.PropertyUniqKey, Value: fmt.Sprintf("U%08d", n)},
		message.Property{Key: message.PropertyProducerSeq, Value: fmt.Sprintf("%s:%d", producer, seq)},
	)
	if err != nil {
		t.Fatal(err)
	}
	m.Properties = props
	return m
}

// TestIdempotentAppend: a repeated producer sequence is answered with the
// first copy's result and writes nothing, in a later entry and within the
// same entry; a sequence below the window is refused; a malformed PSEQ is
// bad input; the producer table survives a clean reopen and a crash (it is
// rebuilt from the records above the checkpoint), so a retry after either
// is still a duplicate.
func TestIdempotentAppend(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := smallConfig("/s")
	s := mustOpen(t, fsys, cfg)
	idx := uint64(1)
	appendOK := func(msgs ...message.Message) []PutResult {
		t.Helper()
		res, err := s.AppendMessages(header(idx), msgs, nil)
		idx++
		if err != nil {
			t.Fatalf("append: %v", err)
		}
		return append([]PutResult(nil), res...)
	}
	first := appendOK(seqMessage(t, "pA", 1, 1), seqMessage(t, "pA", 2, 2), seqMessage(t, "pB", 1, 3))
	for i, r := range first {
		if r.Err != nil || r.Duplicate {
			t.Fatalf("first copy %d: %+v", i, r)
		}
	}
	before := s.Stats().Messages
	// A later entry: two repeats, one new, and a repeat of the new one.
	again := appendOK(seqMessage(t, "pA", 2, 2), seqMessage(t, "pA", 3, 4), seqMessage(t, "pB", 1, 3), seqMessage(t, "pA", 3, 4))
	checkDup := func(got, want PutResult) {
		t.Helper()
		if !got.Duplicate || got.Err != nil || got.PhysicalOffset != want.PhysicalOffset || got.QueueOffset != want.QueueOffset ||
			got.QueueID != want.QueueID || got.MsgID != want.MsgID || got.OffsetMsgID != want.OffsetMsgID || got.StoreTimestamp != want.StoreTimestamp {
			t.Fatalf("duplicate answered %+v, want the first copy's %+v", got, want)
		}
	}
	checkDup(again[0], first[1])
	checkDup(again[2], first[2])
	checkDup(again[3], again[1])
	if again[1].Duplicate || again[1].Err != nil {
		t.Fatalf("new sequence: %+v", again[1])
	}
	if got := s.Stats().Messages - before; got != 1 {
		t.Fatalf("%d messages written for one new sequence", got)
	}
	if hits := s.Stats().DedupHits; hits != 3 {
		t.Fatalf("dedup hits %d, want 3", hits)
	}
	// The sequence decides, not the content: another message under a
	// stored sequence is that sequence's duplicate; without the first
	// copy's UNIQ_KEY it cannot be found again, so its result has no
	// position.
	if r := appendOK(seqMessage(t, "pA", 1, 9))[0]; !r.Duplicate || r.Err != nil || r.QueueOffset != -1 {
		t.Fatalf("another message under a stored sequence: %+v", r)
	}
	m := seqMessage(t, "x", 0, 5)
	m.Properties = append(m.Properties[:len(m.Properties)-1], "01\x02"...) // "x:001": leading zero
	if res := appendOK(m); !errors.Is(res[0].Err, ErrBadMessage) || KindOf(res[0].Err) != KindBadInput {
		t.Fatalf("malformed PSEQ: %+v", res[0])
	}
	// A delayed message's repeat is found in the schedule topic.
	delayedSeq := func() message.Message {
		m := seqMessage(t, "pD", 1, 30)
		m.Properties = message.AppendProperty(m.Properties, message.PropertyTimerDelayMs, "60000")
		return m
	}
	sched := appendOK(delayedSeq())[0]
	if again := appendOK(delayedSeq())[0]; sched.Topic != ScheduleTopic || !again.Duplicate ||
		again.Topic != ScheduleTopic || again.PhysicalOffset != sched.PhysicalOffset || again.QueueOffset != sched.QueueOffset {
		t.Fatalf("a delayed message's repeat: first %+v, again %+v", sched, again)
	}
	s.mu.Lock()
	s.meta.Producers.Config.Window = 2
	s.mu.Unlock()
	appendOK(seqMessage(t, "pA", 4, 6))
	if res := appendOK(seqMessage(t, "pA", 1, 1)); !errors.Is(res[0].Err, ErrSeqTooOld) || KindOf(res[0].Err) != KindBadInput {
		t.Fatalf("a sequence below the window: %+v", res[0])
	}

	// Clean reopen: the table comes from the checkpoint.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, fsys, cfg)
	if res := appendOK(seqMessage(t, "pA", 4, 6)); !res[0].Duplicate {
		t.Fatalf("after a clean reopen: %+v", res[0])
	}
	if seqs := s.meta.Producers.Sequences("pA"); !slices.Equal(seqs, []uint64{3, 4}) {
		t.Fatalf("after a clean reopen: window %v", seqs)
	}
	// A crash after entries the checkpoint does not cover: the replay of
	// their records rebuilds the table.
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	crashFirst := appendOK(seqMessage(t, "pC", 7, 7))
	appendOK(seqMessage(t, "pC", 8, 8))
	crashed := crashImage(t, s, fsys)
	_ = s.Close()
	s = mustOpen(t, crashed, cfg)
	defer s.Close()
	if mode := s.RecoveryPlan().Mode.String(); mode != "abnormal" {
		t.Fatalf("recovery mode %s", mode)
	}
	idx = s.Stats().AppliedIndex + 1
	res := appendOK(seqMessage(t, "pC", 7, 7), seqMessage(t, "pA", 4, 6), seqMessage(t, "pC", 9, 9))
	checkDup(res[0], crashFirst[0])
	if !res[1].Duplicate || res[2].Duplicate {
		t.Fatalf("after the crash: %+v", res)
	}
}

// TestIdempotentReplayMatchesLive: the producer table a store rebuilds from
// its commitlog (no checkpoint covers the entries) encodes exactly as the
// one the live appends built, for random producers, orders and repeats.
func TestIdempotentReplayMatchesLive(t *testing.T) {
	rng := rand.New(rand.NewSource(testSeed(t)))
	fsys := vfs.NewMem()
	cfg := smallConfig("/s")
	s := mustOpen(t, fsys, cfg)
	s.meta.Producers.Config.Window = 8
	if _, err := s.AppendMessages(header(1), []message.Message{seqMessage(t, "p0", 0, 0)}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(); err != nil { // the checkpoint carries the window setting
		t.Fatal(err)
	}
	for idx := uint64(2); idx <= 200; idx++ {
		msgs := make([]message.Message, 1+rng.Intn(6))
		for i := range msgs {
			msgs[i] = seqMessage(t, fmt.Sprintf("p%d", rng.Intn(3)), uint64(rng.Intn(40)), int(idx)*10+i)
		}
		if _, err := s.AppendMessages(header(idx), msgs, nil); err != nil {
			t.Fatal(err)
		}
	}
	s.mu.RLock()
	live := string(s.meta.Encode())
	s.mu.RUnlock()
	crashed := crashImage(t, s, fsys)
	_ = s.Close()
	r := mustOpen(t, crashed, cfg)
	defer r.Close()
	if p := r.RecoveryPlan(); p.Entries < 150 {
		t.Fatalf("recovery replayed %d entries; the test needs the table rebuilt from records", p.Entries)
	}
	r.mu.RLock()
	replayed := string(r.meta.Encode())
	r.mu.RUnlock()
	if live != replayed {
		t.Fatalf("producer table after replay differs from the live one:\n live %x\n replayed %x", live, replayed)
	}
}

// crashImage is fsys as a kill -9 leaves it: the commitlog tail written
// back (the kernel does that for dirty mapped pages; the heap-backed twin
// of a mapping writes only on Flush) without a checkpoint covering it.
func crashImage(t *testing.T, s *Store, fsys *vfs.MemFS) *vfs.MemFS {
	t.Helper()
	if err := s.log.Flush(s.log.WriteOffset()); err != nil {
		t.Fatal(err)
	}
	return fsys.CrashClone(vfs.CrashOptions{Mode: vfs.KeepUnsynced})
}
