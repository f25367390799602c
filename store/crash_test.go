package store

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"testing"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/meta"
	"github.com/raftmq/raftmq/vfs"
)

// The crash tests run a scripted workload (appends across segment rolls,
// consume-queue and index rolls, commands, flushes and checkpoints,
// retention deletes) on vfs.MemFS, crash it at mutating operation k with
// unsynced bytes dropped, kept or torn, reopen the clone and check that the
// store is exactly a prefix of what was applied, no shorter than the last
// durable checkpoint, with consume queues and index agreeing with it.

type appliedMsg struct {
	topic  string
	queue  int32
	offset int64
	phy    int64
	body   []byte
	key    string
	entry  uint64
}

type workloadModel struct {
	msgs      []appliedMsg
	applied   uint64 // last entry applied without error
	durable   uint64 // applied index of the last checkpoint that completed
	minOffset int64
	// commits are the entries whose CommitOffsets of group g, alpha/0
	// (offset = the entry's index) applied, oldest first.
	commits []uint64
	// inflight is the entry being applied when the workload stopped (0:
	// none), with its messages. A crash may leave it whole in the
	// commitlog (its pages written back before the power went); recovery
	// then applies it, which is right: Raft applies only committed entries.
	inflight     uint64
	inflightMsgs []message.Message
}

// workloadEntries makes the workload about 2,100 mutating operations.
const workloadEntries = 400

// crashPointsFlag: how many crash points TestCrashAtEveryWrite samples;
// under the race detector (which checks concurrency, not crash coverage)
// it takes a tenth.
var crashPointsFlag = flag.Int("crash.points", 2000, "crash points TestCrashAtEveryWrite samples (every one when the workload has fewer)")

// runWorkload applies entries 1..workloadEntries (or stops at the first error:
// the crash) and records what was applied.
func runWorkload(s *Store, seed int64, m *workloadModel, from uint64) error {
	rng := rand.New(rand.NewSource(seed))
	for i := uint64(1); i <= workloadEntries; i++ {
		msgs := workloadEntry(rng, i)
		if i < from {
			continue // already applied before the crash
		}
		m.inflight, m.inflightMsgs = i, msgs
		if err := applyWorkloadEntry(s, i, msgs, m); err != nil {
			return err
		}
		m.applied, m.inflight, m.inflightMsgs = i, 0, nil
		if i%7 == 0 {
			// Every other flush is the service loop's, which leaves the
			// index to the next IndexFlushInterval: recovery must
			// re-index what the checkpoint covers and the index does not.
			flush := s.Flush
			if i%14 == 7 {
				flush = s.flushPeriodic
			}
			if err := flush(); err != nil {
				return err
			}
			m.durable, _ = s.Applied()
		}
		if i%45 == 0 {
			if err := s.clean(); err != nil {
				return err
			}
			m.minOffset = s.log.MinOffset()
		}
	}
	return nil
}

// workloadEntry draws entry i's content; it consumes rng identically whether
// or not the entry is applied, so replays see the same entries.
func workloadEntry(rng *rand.Rand, i uint64) []message.Message {
	if i%23 == 0 || i%31 == 0 {
		rng.Intn(2)
		return nil // a command entry
	}
	n := 1 + rng.Intn(5)
	msgs := make([]message.Message, n)
	for j := range msgs {
		topic := []string{"alpha", "beta"}[rng.Intn(2)]
		msgs[j] = testMessage(topic, int32(rng.Intn(4)), int(i)*10+j, rng)
	}
	return msgs
}

func applyWorkloadEntry(s *Store, i uint64, msgs []message.Message, m *workloadModel) error {
	h := header(i)
	switch {
	case i%23 == 0:
		err := s.CreateTopic(h, TopicConfig{Name: fmt.Sprintf("t%d", i), Queues: 2})
		return err
	case i%31 == 0:
		err := s.CommitOffsets(h, []OffsetCommit{{Group: "g", Topic: "alpha", QueueID: 0, Offset: int64(i)}})
		if errors.Is(err, ErrNoSuchTopic) {
			return s.MarkApplied(h)
		}
		if err == nil {
			m.commits = append(m.commits, i)
		}
		return err
	}
	res, err := s.AppendMessages(h, msgs, nil)
	if err != nil {
		return err
	}
	for j, r := range res {
		if r.Err != nil {
			return fmt.Errorf("entry %d message %d: %w", i, j, r.Err)
		}
		m.msgs = append(m.msgs, appliedMsg{topic: r.Topic, queue: r.QueueID, offset: r.QueueOffset, phy: r.PhysicalOffset,
			body: msgs[j].Body, key: fmt.Sprintf("k%d", int(i)*10+j), entry: i})
	}
	return nil
}

func newModel() *workloadModel {
	return &workloadModel{}
}

// commitAt is the offset group g has committed for alpha/0 in a store that
// applied entry applied: the index of the last commit entry up to it (the
// in-flight one included when it is a commit that survived), 0 for none.
func (m *workloadModel) commitAt(applied uint64) uint64 {
	want := uint64(0)
	for _, c := range m.commits {
		if c <= applied {
			want = c
		}
	}
	if m.inflight != 0 && applied == m.inflight && m.inflight%31 == 0 && m.inflight%23 != 0 && m.hasTopic("alpha") {
		want = m.inflight // the commit applies once alpha exists (else the entry is only marked applied)
	}
	return want
}

func (m *workloadModel) hasTopic(topic string) bool {
	for _, msg := range m.msgs {
		if msg.topic == topic {
			return true
		}
	}
	return false
}

// recoveredMsgs is what a store that applied entry applied holds: the
// applied entries' messages up to it, and the in-flight entry's if it is
// that one (at the queue offsets that follow; their physical offsets are
// unknown, -1).
func (m *workloadModel) recoveredMsgs(applied uint64) []appliedMsg {
	out := keepUpTo(m.msgs, applied)
	if m.inflight == 0 || applied != m.inflight {
		return out
	}
	next := map[meta.QueueKey]int64{}
	for _, msg := range out {
		k := meta.QueueKey{Topic: msg.topic, Queue: msg.queue}
		next[k] = max(next[k], msg.offset+1)
	}
	for j, msg := range m.inflightMsgs {
		k := meta.QueueKey{Topic: msg.Topic, Queue: msg.QueueID}
		out = append(out, appliedMsg{topic: msg.Topic, queue: msg.QueueID, offset: next[k], phy: -1, body: msg.Body,
			key: fmt.Sprintf("k%d", int(m.inflight)*10+j), entry: m.inflight})
		next[k]++
	}
	return out
}

// checkRecovered verifies s against the model: exactly the entries up to
// s.Applied(), no fewer than the durable checkpoint's and no more than the
// last applied or the one in flight.
func checkRecovered(t *testing.T, s *Store, m *workloadModel, label string) {
	t.Helper()
	applied, _ := s.Applied()
	if applied < m.durable || applied > max(m.applied, m.inflight) {
		t.Fatalf("%s: applied %d, want within [durable %d, applied %d (in flight %d)]", label, applied, m.durable, m.applied, m.inflight)
	}
	want := map[meta.QueueKey]int64{}
	for _, msg := range m.recoveredMsgs(applied) {
		if msg.entry > applied {
			continue
		}
		k := meta.QueueKey{Topic: msg.topic, Queue: msg.queue}
		want[k] = max(want[k], msg.offset+1)
		if msg.phy >= 0 && msg.phy < s.log.MinOffset() {
			continue // removed by retention
		}
		r, err := s.GetMessages(msg.topic, msg.queue, msg.offset, 1, 0, "")
		if err != nil || r.Status != Found || len(r.Messages) != 1 {
			t.Fatalf("%s: message %s/%d@%d (entry %d): %v %v", label, msg.topic, msg.queue, msg.offset, msg.entry, err, r.Status)
		}
		got := r.Messages[0]
		if (msg.phy >= 0 && got.PhysicalOffset != msg.phy) || !bytes.Equal(got.Body, msg.body) {
			t.Fatalf("%s: message %s/%d@%d differs: phy %d want %d", label, msg.topic, msg.queue, msg.offset, got.PhysicalOffset, msg.phy)
		}
		keys, err := s.QueryByKey(msg.topic, msg.key, 4, 0, 1<<62)
		if err != nil || len(keys) != 1 || (msg.phy >= 0 && keys[0].PhysicalOffset != msg.phy) {
			t.Fatalf("%s: key %s of entry %d not found by the index (%v, %d hits)", label, msg.key, msg.entry, err, len(keys))
		}
	}
	for k, n := range want {
		if got, _ := s.MaxOffset(k.Topic, k.Queue); got != n {
			t.Fatalf("%s: queue %s/%d max offset %d, want %d", label, k.Topic, k.Queue, got, n)
		}
	}
	for _, topic := range []string{"alpha", "beta"} {
		for q := int32(0); q < 4; q++ {
			if _, ok := want[meta.QueueKey{Topic: topic, Queue: q}]; !ok {
				if got, _ := s.MaxOffset(topic, q); got != 0 {
					t.Fatalf("%s: queue %s/%d has %d messages, want none", label, topic, q, got)
				}
			}
		}
	}
	wantCommit := m.commitAt(applied)
	if off, ok := s.ConsumerOffset("g", "alpha", 0); ok != (wantCommit > 0) || (ok && uint64(off) != wantCommit) {
		t.Fatalf("%s: group g's offset of alpha/0 is %d (found %v), want %d (found %v)", label, off, ok, wantCommit, wantCommit > 0)
	}
}

func crashConfig() Config {
	c := smallConfig("/data/store")
	c.CommitLogFileSize = 16 << 10
	c.MaxMessageSize = 2 << 10
	return c
}

func TestCrashAtEveryWrite(t *testing.T) {
	seed := testSeed(t)
	cfg := crashConfig()
	// A clean run tells how many mutating operations the workload makes.
	ref := vfs.NewMem()
	s := mustOpen(t, ref, cfg)
	start := ref.OpCount()
	model := newModel()
	if err := runWorkload(s, seed, model, 1); err != nil {
		t.Fatalf("clean run: %v", err)
	}
	total := ref.OpCount() - start
	s.Close()
	rng := rand.New(rand.NewSource(seed))
	want := *crashPointsFlag
	if raceBuild {
		want /= 10
	}
	order := rng.Perm(total) // the seed's order of every crash point
	t.Logf("workload makes %d mutating operations; crashing at %d of them (more while a recovery outcome is still missing), one crash mode each", total, min(want, total))
	modes := []vfs.CrashOptions{{Mode: vfs.DropUnsynced}, {Mode: vfs.KeepUnsynced}, {Mode: vfs.TearUnsynced}, {Mode: vfs.TearUnsynced, Reorder: true},
		{Mode: vfs.KeepUnsynced, Writeback: true}, {Mode: vfs.TearUnsynced, Reorder: true, Writeback: true}, {Mode: vfs.DropUnsynced, Writeback: true}}
	tally := map[string]int{}
	// The sample is random, so a small one (the race build's) can miss a
	// rare outcome (an in-flight entry written back whole is about 2% of
	// the points): the loop then goes on through the seed's order until
	// every outcome has been seen or every point tried, so the coverage
	// check below fails only when an outcome is unreachable.
	for i, k := range order {
		if i >= want && crashCoverageMissing(tally) == "" {
			break
		}
		opts := modes[i%len(modes)]
		opts.Rand = rand.New(rand.NewSource(seed + int64(k)))
		crashOnce(t, seed, cfg, k, opts, tally)
		if t.Failed() {
			t.Fatalf("failed at crash point k=%d mode=%v reorder=%v writeback=%v seed=%d", k, opts.Mode, opts.Reorder, opts.Writeback, seed)
		}
	}
	t.Logf("outcomes: %v", tally)
	if missing := crashCoverageMissing(tally); missing != "" {
		t.Fatalf("no crash point exercised %s: %v", missing, tally)
	}
}

// crashCoverageMissing names the first recovery outcome the tally lacks,
// or returns "" when all were seen.
func crashCoverageMissing(tally map[string]int) string {
	switch {
	case tally["mode=abnormal"] == 0:
		return "abnormal recovery"
	case tally["lost-unflushed-entries"] == 0:
		return "a loss of unflushed entries"
	case tally["tail=torn"]+tally["tail=corrupt"] == 0:
		return "a cut tail"
	case tally["in-flight-entry-recovered"] == 0:
		return "write-back of an entry in flight"
	}
	return ""
}

func crashOnce(t *testing.T, seed int64, cfg Config, k int, opts vfs.CrashOptions, tally map[string]int) {
	fsys := vfs.NewMem()
	s := mustOpen(t, fsys, cfg)
	fsys.CrashAt(k, opts)
	model := newModel()
	err := runWorkload(s, seed, model, 1)
	clone, crashed := fsys.Crashed()
	if !crashed {
		if err != nil {
			t.Fatalf("k=%d: workload failed without a crash: %v", k, err)
		}
		s.Close()
		return
	}
	label := fmt.Sprintf("k=%d %v reorder=%v writeback=%v", k, opts.Mode, opts.Reorder, opts.Writeback)
	s2, err := Open(clone, cfg)
	if err != nil {
		t.Fatalf("%s: reopen after crash: %v", label, err)
	}
	defer s2.Close()
	plan := s2.RecoveryPlan()
	tally["mode="+plan.Mode.String()]++
	tally["tail="+plan.Tail.String()]++
	if applied, _ := s2.Applied(); applied < model.applied {
		tally["lost-unflushed-entries"]++
	} else if model.inflight != 0 && applied == model.inflight {
		tally["in-flight-entry-recovered"]++
	}
	checkRecovered(t, s2, model, label)
	// Raft replays what the store lacks: the same entries again.
	applied, _ := s2.Applied()
	replay := newModel()
	replay.applied = applied // what recovery kept; the replay applies the rest (none if it kept all)
	replay.msgs = resolvePhysical(t, s2, model.recoveredMsgs(applied), label)
	for _, c := range model.commits {
		if c <= applied {
			replay.commits = append(replay.commits, c)
		}
	}
	if c := model.commitAt(applied); c > 0 && (len(replay.commits) == 0 || replay.commits[len(replay.commits)-1] != c) {
		replay.commits = append(replay.commits, c) // the in-flight commit that survived
	}
	if err := runWorkload(s2, seed, replay, applied+1); err != nil {
		t.Fatalf("%s: replay after recovery: %v", label, err)
	}
	replay.durable = replay.applied
	checkRecovered(t, s2, replay, label+" after replay")
}

// resolvePhysical fills in the physical offsets the model does not know
// (an in-flight entry's, -1) from s, which holds those messages.
func resolvePhysical(t *testing.T, s *Store, msgs []appliedMsg, label string) []appliedMsg {
	t.Helper()
	for i, msg := range msgs {
		if msg.phy >= 0 {
			continue
		}
		r, err := s.GetMessages(msg.topic, msg.queue, msg.offset, 1, 0, "")
		if err != nil || len(r.Messages) != 1 {
			t.Fatalf("%s: in-flight message %s/%d@%d: %v %v", label, msg.topic, msg.queue, msg.offset, err, r.Status)
		}
		msgs[i].phy = r.Messages[0].PhysicalOffset
	}
	return msgs
}

func keepUpTo(msgs []appliedMsg, applied uint64) []appliedMsg {
	var out []appliedMsg
	for _, m := range msgs {
		if m.entry <= applied {
			out = append(out, m)
		}
	}
	return out
}
