package store

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/consumequeue"
	"github.com/raftmq/raftmq/index"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/meta"
	"github.com/raftmq/raftmq/mmap"
	"github.com/raftmq/raftmq/recovery"
	"github.com/raftmq/raftmq/vfs"
)

// The corruption tests build a store of several segments, checkpoint it,
// append a tail the checkpoint does not cover (written back to the files as
// the kernel would, but never checkpointed), take a kill -9 image of it (KeepUnsynced: the
// abort file stays, so the next Open runs abnormal recovery), damage one
// file family of the image and check the documented outcome: damage above
// the checkpoint is cut or repaired, damage the checkpoint vouches for
// refuses to open with an error naming the file.

const (
	corruptEntries    = 60
	corruptCheckpoint = 40 // entries 1..40 are checkpointed, 41..60 are not
)

// damageFixture is a crashed store image and what was applied to it.
type damageFixture struct {
	cfg    Config
	image  *vfs.MemFS // never damaged: fresh() copies it
	model  *workloadModel
	ckpt   recovery.Checkpoint
	last   entryMark // the last applied entry
	seed   int64
	tagsOf map[string]string // key -> TAGS of its message
}

// fresh returns an undamaged copy of the crashed image.
func (f *damageFixture) fresh() *vfs.MemFS {
	return f.image.CrashClone(vfs.CrashOptions{Mode: vfs.KeepUnsynced})
}

func newDamageFixture(t *testing.T) *damageFixture {
	t.Helper()
	return newDamageFixtureWith(t, crashConfig())
}

// newDamageFixtureWith builds the fixture's image with cfg.
func newDamageFixtureWith(t *testing.T, cfg Config) *damageFixture {
	t.Helper()
	f := &damageFixture{cfg: cfg, model: newModel(), seed: testSeed(t), tagsOf: map[string]string{}}
	fsys := vfs.NewMem()
	s := mustOpen(t, fsys, f.cfg)
	rng := rand.New(rand.NewSource(f.seed))
	for i := uint64(1); i <= corruptEntries; i++ {
		msgs := make([]message.Message, 1+rng.Intn(4))
		for j := range msgs {
			msgs[j] = testMessage([]string{"alpha", "beta"}[rng.Intn(2)], int32(rng.Intn(4)), int(i)*10+j, rng)
			f.tagsOf[fmt.Sprintf("k%d", int(i)*10+j)] = []string{"red", "blue"}[(int(i)*10+j)%2]
		}
		if err := applyWorkloadEntry(s, i, msgs, f.model); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		f.model.applied = i
		if i == corruptCheckpoint {
			if err := s.Flush(); err != nil {
				t.Fatalf("flush: %v", err)
			}
			f.model.durable = i
		}
	}
	if n := len(s.log.Segments()); n < 4 {
		t.Fatalf("fixture has %d commitlog segments, want several", n)
	}
	// The kernel writes dirty mapped pages back on its own: make the tail
	// reach the files (the heap-backed twin of a mapping only writes on
	// Flush) without a checkpoint covering it.
	if err := errors.Join(s.log.Flush(s.log.WriteOffset()), s.cqs.Flush(), s.idx.Flush()); err != nil {
		t.Fatalf("write back the tail: %v", err)
	}
	f.last = s.applied
	f.image = fsys.CrashClone(vfs.CrashOptions{Mode: vfs.KeepUnsynced})
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	ckpt, err := recovery.ReadCheckpoint(f.image, f.cfg.Dir)
	if err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	if ckpt.AppliedIndex != corruptCheckpoint {
		t.Fatalf("checkpoint at index %d, want %d", ckpt.AppliedIndex, corruptCheckpoint)
	}
	f.ckpt = ckpt
	return f
}

// segmentPath is the commitlog segment holding phy.
func (f *damageFixture) segmentPath(phy int64) string {
	return filepath.Join(f.cfg.Dir, commitLogDir, mmap.FileName(phy-phy%f.cfg.CommitLogFileSize))
}

// unitPath is the consume-queue file holding the unit of msg, and the unit's
// byte offset in it.
func (f *damageFixture) unitPath(msg appliedMsg) (string, int64) {
	pos := msg.offset * consumequeue.UnitSize
	start := pos - pos%f.cfg.ConsumeQueueFileSize
	return filepath.Join(f.cfg.Dir, consumeQueueDir, msg.topic, fmt.Sprint(msg.queue), mmap.FileName(start)), pos - start
}

// verify checks s against the model like checkRecovered, but reports the
// first difference instead of failing, and also reads every message through
// its tag filter (a damaged tagsCode would hide it from tag consumers).
func (f *damageFixture) verify(s *Store, wantApplied uint64) error {
	applied, _ := s.Applied()
	if applied != wantApplied {
		return fmt.Errorf("applied %d, want %d", applied, wantApplied)
	}
	want := map[meta.QueueKey]int64{}
	for _, msg := range f.model.msgs {
		if msg.entry > applied {
			continue
		}
		k := meta.QueueKey{Topic: msg.topic, Queue: msg.queue}
		want[k] = max(want[k], msg.offset+1)
		if err := f.verifyMessage(s, msg); err != nil {
			return err
		}
	}
	for _, topic := range []string{"alpha", "beta"} {
		for q := int32(0); q < 4; q++ {
			if got, _ := s.MaxOffset(topic, q); got != want[meta.QueueKey{Topic: topic, Queue: q}] {
				return fmt.Errorf("queue %s/%d max offset %d, want %d", topic, q, got, want[meta.QueueKey{Topic: topic, Queue: q}])
			}
		}
	}
	return nil
}

func (f *damageFixture) verifyMessage(s *Store, msg appliedMsg) error {
	for _, tag := range []string{f.tagsOf[msg.key], ""} { // filtered first: it alone skips units on their tagsCode
		r, err := s.GetMessages(msg.topic, msg.queue, msg.offset, 1, 0, tag)
		if err != nil {
			return fmt.Errorf("message %s/%d@%d tag %q: %w", msg.topic, msg.queue, msg.offset, tag, err)
		}
		if r.Status != Found || len(r.Messages) != 1 {
			return fmt.Errorf("message %s/%d@%d tag %q: %v, %d messages (silently skipped)", msg.topic, msg.queue, msg.offset, tag, r.Status, len(r.Messages))
		}
		got := r.Messages[0]
		if tag != "" && got.QueueOffset > msg.offset {
			return fmt.Errorf("message %s/%d@%d hidden from tag %q consumers: got offset %d (silently skipped)", msg.topic, msg.queue, msg.offset, tag, got.QueueOffset)
		}
		if got.PhysicalOffset != msg.phy || !bytes.Equal(got.Body, msg.body) {
			return fmt.Errorf("message %s/%d@%d: served phy %d, want %d (wrong message)", msg.topic, msg.queue, msg.offset, got.PhysicalOffset, msg.phy)
		}
	}
	keys, err := s.QueryByKey(msg.topic, msg.key, 4, 0, 1<<62)
	if err != nil || len(keys) != 1 || keys[0].PhysicalOffset != msg.phy {
		return fmt.Errorf("key %s (entry %d) not found by the index: %v, %d hits", msg.key, msg.entry, err, len(keys))
	}
	return nil
}

// openDamaged opens a damaged image; the caller closes the store.
func (f *damageFixture) openDamaged(fsys *vfs.MemFS) (*Store, error) {
	return Open(fsys, f.cfg)
}

func TestCorruptCommitLogTailAboveCheckpoint(t *testing.T) {
	f := newDamageFixture(t)
	if f.last.Offset < f.ckpt.ConfirmOffset {
		t.Fatalf("last entry at %d is not above the checkpoint %d", f.last.Offset, f.ckpt.ConfirmOffset)
	}
	// Every byte region of the last entry: its frame, a record header, a
	// body, its end. Each must cut the tail at that entry.
	size := f.last.End - f.last.Offset
	for _, rel := range []int64{0, 4, 9, message.FrameSize + 2, size / 2, size - 1} {
		fsys := f.fresh()
		phy := f.last.Offset + rel
		seg := f.segmentPath(phy)
		if err := fsys.FlipBit(seg, phy%f.cfg.CommitLogFileSize, uint(rel%8)); err != nil {
			t.Fatal(err)
		}
		s, err := f.openDamaged(fsys)
		if err != nil {
			t.Fatalf("flip at +%d of the last entry: open: %v", rel, err)
		}
		p := s.RecoveryPlan()
		// The cut lands at the last entry, or at the previous entry's end
		// when the last one opened a segment (the blank sits between).
		if p.Mode != recovery.Abnormal || p.Tail == recovery.TailClean || p.Last.RaftIndex != corruptEntries-1 || p.ConfirmOffset > f.last.Offset {
			t.Errorf("flip at +%d: mode %v tail %v confirm %d index %d, want abnormal, a cut tail at %d", rel, p.Mode, p.Tail, p.ConfirmOffset, p.Last.RaftIndex, f.last.Offset)
		}
		if err := f.verify(s, corruptEntries-1); err != nil {
			t.Errorf("flip at +%d (tail %v: %v): %v", rel, p.Tail, p.TailErr, err)
		}
		s.Close()
	}
}

func TestCorruptCommitLogAtCheckpointEntry(t *testing.T) {
	f := newDamageFixture(t)
	seg := f.segmentPath(f.ckpt.LastEntryOffset)
	size := f.ckpt.ConfirmOffset - f.ckpt.LastEntryOffset
	for _, rel := range []int64{0, 12, size / 2, size - 1} {
		fsys := f.fresh()
		phy := f.ckpt.LastEntryOffset + rel
		if err := fsys.FlipBit(seg, phy%f.cfg.CommitLogFileSize, 3); err != nil {
			t.Fatal(err)
		}
		s, err := f.openDamaged(fsys)
		if err == nil {
			s.Close()
			t.Fatalf("flip at +%d of the checkpointed entry: store opened", rel)
		}
		var rerr *recovery.Error
		if !errors.Is(err, recovery.ErrCorruptBelowCheckpoint) || !errors.As(err, &rerr) {
			t.Fatalf("flip at +%d: %v, want ErrCorruptBelowCheckpoint as *recovery.Error", rel, err)
		}
		if rerr.Offset != f.ckpt.LastEntryOffset || !strings.HasSuffix(rerr.File, filepath.Base(seg)) {
			t.Fatalf("flip at +%d: error names %s@%d, want %s@%d", rel, rerr.File, rerr.Offset, seg, f.ckpt.LastEntryOffset)
		}
	}
}

// A flip in an older entry below the checkpoint is not looked at by Open
// (recovery verifies only the entry the checkpoint points at). Every flip
// in the record must then fail the read: per-record checks, and the
// entry's CRC32C verified on the first read of the entry.
func TestCorruptCommitLogBelowCheckpointDetectedOnRead(t *testing.T) {
	f := newDamageFixture(t)
	victim := f.model.msgs[len(f.model.msgs)/4]
	if victim.entry >= corruptCheckpoint {
		t.Fatalf("victim entry %d is not below the checkpoint", victim.entry)
	}
	s, err := f.openDamaged(f.fresh())
	if err != nil {
		t.Fatal(err)
	}
	orig, err := s.LookupByOffset(victim.phy)
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	tally := map[string]int{}
	for rel := int64(0); rel < int64(orig.Size); rel += 3 {
		fsys := f.fresh()
		phy := victim.phy + rel
		if err := fsys.FlipBit(f.segmentPath(phy), phy%f.cfg.CommitLogFileSize, uint(rel%8)); err != nil {
			t.Fatal(err)
		}
		s, err := f.openDamaged(fsys)
		if err != nil {
			t.Fatalf("flip at +%d: open: %v", rel, err)
		}
		r, err := s.GetMessages(victim.topic, victim.queue, victim.offset, 1, 0, "")
		s.Close()
		inBody := rel >= message.OffBody && rel < message.OffBody+int64(len(victim.body))
		field := "header"
		switch {
		case inBody:
			field = "body"
		case rel >= message.OffBody+int64(len(victim.body)):
			field = "topic/properties"
		}
		switch {
		case err != nil:
			tally[field+": read error"]++
		case r.Status != Found || len(r.Messages) != 1:
			tally[field+": not found"]++
		default:
			t.Fatalf("%s flip at +%d served: %+v", field, rel, r.Messages[0])
		}
	}
	if tally["body: read error"] == 0 {
		t.Fatalf("no body flip was tried: %v", tally)
	}
	t.Logf("flips in a %d-byte record below the checkpoint: %v", orig.Size, tally)
}

func TestCorruptCommitLogSegmentSize(t *testing.T) {
	f := newDamageFixture(t)
	for _, phy := range []int64{0, f.ckpt.ConfirmOffset, f.last.Offset} {
		for _, delta := range []int64{-1, -4096, 4096} {
			fsys := f.fresh()
			seg := f.segmentPath(phy)
			if err := fsys.TruncateFile(seg, f.cfg.CommitLogFileSize+delta); err != nil {
				t.Fatal(err)
			}
			s, err := f.openDamaged(fsys)
			if err == nil {
				s.Close()
				t.Fatalf("segment %s resized by %d: store opened", seg, delta)
			}
			if !errors.Is(err, mmap.ErrFileSize) || !strings.Contains(err.Error(), filepath.Base(seg)) {
				t.Fatalf("segment %s resized by %d: %v, want mmap.ErrFileSize naming it", seg, delta, err)
			}
		}
	}
}

func TestCorruptCheckpoint(t *testing.T) {
	f := newDamageFixture(t)
	name := filepath.Join(f.cfg.Dir, recovery.CheckpointName)
	b, err := f.image.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(f.seed))
	offs := []int64{0, 32, 40, 48, 64, int64(len(b)) - 5, int64(len(b)) - 1}
	for range 8 {
		offs = append(offs, rng.Int63n(int64(len(b))))
	}
	for _, off := range offs {
		fsys := f.fresh()
		if err := fsys.FlipBit(name, off, uint(off%8)); err != nil {
			t.Fatal(err)
		}
		s, err := f.openDamaged(fsys)
		if err == nil {
			s.Close()
			t.Fatalf("checkpoint bit flip at byte %d: store opened", off)
		}
		if !errors.Is(err, recovery.ErrCheckpointCorrupt) {
			t.Fatalf("checkpoint bit flip at byte %d: %v, want ErrCheckpointCorrupt", off, err)
		}
	}
	for _, size := range []int64{0, 10, int64(len(b)) - 1} {
		fsys := f.fresh()
		if err := fsys.TruncateFile(name, size); err != nil {
			t.Fatal(err)
		}
		if s, err := f.openDamaged(fsys); !errors.Is(err, recovery.ErrCheckpointCorrupt) {
			if err == nil {
				s.Close()
			}
			t.Fatalf("checkpoint truncated to %d: %v, want ErrCheckpointCorrupt", size, err)
		}
	}
}

// firstAbove is the first message whose record lies at or above phy.
func (f *damageFixture) firstAbove(phy int64) appliedMsg {
	for _, m := range f.model.msgs {
		if m.phy >= phy {
			return m
		}
	}
	panic("no message above the checkpoint")
}

// TestCorruptConsumeQueueAboveCheckpoint flips every bit of a unit that lies
// above the checkpoint (written back, never checkpointed). A flip that makes
// the unit invalid (size <= 0, negative offset, overlap) is found by the
// queue scan and rebuilt from the commitlog; a flip that leaves a plausible
// unit is cut all the same: recovery truncates every queue to the unit count
// of the checkpoint's queue table and rebuilds the rest from the commitlog.
func TestCorruptConsumeQueueAboveCheckpoint(t *testing.T) {
	f := newDamageFixture(t)
	victim := f.firstAbove(f.ckpt.ConfirmOffset)
	tally := f.flipUnit(t, victim)
	t.Logf("consume-queue unit above the checkpoint, outcomes per flipped bit: %v", tally)
	if tally["size: repaired"] == 0 {
		t.Fatalf("no size flip was repaired: %v", tally)
	}
	for outcome := range tally {
		if !strings.HasSuffix(outcome, ": repaired") {
			t.Fatalf("unit above the checkpoint not always repaired: %v", tally)
		}
	}
}

// TestCorruptConsumeQueueTruncated loses the end of a consume-queue file:
// the units are zeroed from a point on (the file keeps its size), above or
// below the checkpoint. Recovery finds the queue shorter than the queue
// table and rebuilds it from the commitlog.
func TestCorruptConsumeQueueTruncated(t *testing.T) {
	f := newDamageFixture(t)
	above := f.firstAbove(f.ckpt.ConfirmOffset)
	below := f.model.msgs[len(f.model.msgs)/4]
	type cut struct {
		victim appliedMsg
		from   int64 // relative to the victim's unit; -1: the whole file
	}
	cuts := []cut{{above, 0}, {above, 7}, {below, 0}, {above, -1}}
	for _, c := range cuts {
		name, at := f.unitPath(c.victim)
		from := at + c.from
		if c.from < 0 {
			from = 0
		}
		fsys := f.fresh()
		if err := errors.Join(fsys.TruncateFile(name, from), fsys.TruncateFile(name, f.cfg.ConsumeQueueFileSize)); err != nil {
			t.Fatal(err)
		}
		s, err := f.openDamaged(fsys)
		if err != nil {
			t.Fatalf("%s zeroed from %d: open: %v", name, from, err)
		}
		err = f.verify(s, corruptEntries)
		s.Close()
		if err != nil {
			t.Fatalf("%s zeroed from %d: not repaired: %v", name, from, err)
		}
	}
}

// TestCorruptConsumeQueueFileSize: a consume-queue file of the wrong size
// is refused like a commitlog segment (RocketMQ's MappedFile load check),
// naming the file; it is not rebuilt.
func TestCorruptConsumeQueueFileSize(t *testing.T) {
	f := newDamageFixture(t)
	name, at := f.unitPath(f.model.msgs[len(f.model.msgs)-1])
	for _, size := range []int64{at, f.cfg.ConsumeQueueFileSize - 1, f.cfg.ConsumeQueueFileSize + 20} {
		fsys := f.fresh()
		if err := fsys.TruncateFile(name, size); err != nil {
			t.Fatal(err)
		}
		s, err := f.openDamaged(fsys)
		if err == nil {
			s.Close()
			t.Fatalf("%s resized to %d: store opened", name, size)
		}
		if !errors.Is(err, mmap.ErrFileSize) || !strings.Contains(err.Error(), name) {
			t.Fatalf("%s resized to %d: %v, want mmap.ErrFileSize naming it", name, size, err)
		}
	}
}

// TestCorruptConsumeQueueBelowCheckpoint flips every bit of a unit the
// checkpoint covers. Units carry no checksum, so Open cannot tell; the test
// pins down that a damaged unit never makes the store serve the wrong
// message (the record checks catch a wrong offset or size) nor hide one
// from a tag filter (a unit not dispatched by this process is checked
// against its record's TAGS before its tagsCode is trusted), and logs the
// other outcomes.
func TestCorruptConsumeQueueBelowCheckpoint(t *testing.T) {
	f := newDamageFixture(t)
	tally := f.flipUnit(t, f.model.msgs[len(f.model.msgs)/4])
	t.Logf("consume-queue unit below the checkpoint, outcomes per flipped bit: %v", tally)
}

// flipUnit flips each bit of msg's consume-queue unit in turn, opens the
// image and classifies the outcome; a wrong message served or a message
// hidden fails the test.
func (f *damageFixture) flipUnit(t *testing.T, msg appliedMsg) map[string]int {
	t.Helper()
	name, at := f.unitPath(msg)
	tally := map[string]int{}
	for bit := 0; bit < consumequeue.UnitSize*8; bit++ {
		fsys := f.fresh()
		if err := fsys.FlipBit(name, at+int64(bit/8), uint(bit%8)); err != nil {
			t.Fatal(err)
		}
		s, err := f.openDamaged(fsys)
		if err != nil {
			tally[unitField(bit)+": open refused"]++
			continue
		}
		err = f.verify(s, corruptEntries)
		counted := s.Stats().Corruptions
		s.Close()
		if err != nil && unitField(bit) == "tagsCode" && counted == 0 {
			t.Fatalf("unit %s/%d@%d bit %d (tagsCode): %v, not counted in Stats.Corruptions", msg.topic, msg.queue, msg.offset, bit, err)
		}
		switch {
		case err == nil:
			tally[unitField(bit)+": repaired"]++
		case strings.Contains(err.Error(), "wrong message"):
			t.Fatalf("unit %s/%d@%d bit %d (%s): %v", msg.topic, msg.queue, msg.offset, bit, unitField(bit), err)
		case strings.Contains(err.Error(), "silently skipped"):
			t.Fatalf("unit %s/%d@%d bit %d (%s): message hidden: %v", msg.topic, msg.queue, msg.offset, bit, unitField(bit), err)
		default:
			tally[unitField(bit)+": read error"]++
		}
	}
	return tally
}

func unitField(bit int) string {
	switch byteOff := bit / 8; {
	case byteOff < 8:
		return "phyOffset"
	case byteOff < 12:
		return "size"
	default:
		return "tagsCode"
	}
}

// indexFiles lists the image's index directory and files.
func (f *damageFixture) indexFiles(t *testing.T) (string, []string) {
	t.Helper()
	dir := filepath.Join(f.cfg.Dir, indexDir)
	names, err := f.image.List(dir)
	if err != nil || len(names) == 0 {
		t.Fatalf("index files: %v %v", names, err)
	}
	return dir, names
}

// indexHeader reads the header of the image's index file name in dir.
func (f *damageFixture) indexHeader(t *testing.T, dir, name string) index.Header {
	t.Helper()
	b, err := f.image.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	h, err := index.DecodeHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestCorruptIndexAboveCheckpoint damages index entries written after the
// checkpoint: abnormal recovery cuts the index back to the checkpointed
// count and redispatches the tail, so every key is found afterwards.
func TestCorruptIndexAboveCheckpoint(t *testing.T) {
	f := newDamageFixture(t)
	dir, names := f.indexFiles(t)
	// The checkpointed file's entries from the checkpointed count on, and
	// the first entries of every newer file.
	type spot struct {
		file  string
		entry int
	}
	var spots []spot
	for _, n := range names {
		switch {
		case n == f.ckpt.Index.File:
			h := f.indexHeader(t, dir, n)
			for e := int(f.ckpt.Index.IndexCount); e < int(h.IndexCount); e++ {
				spots = append(spots, spot{n, e})
			}
		case n > f.ckpt.Index.File:
			spots = append(spots, spot{n, 1}, spot{n, 2})
		}
	}
	if len(spots) == 0 {
		t.Fatalf("no index entry lies above the checkpoint (%+v)", f.ckpt.Index)
	}
	entries := index.HeaderSize + f.cfg.IndexMaxHashSlots*index.SlotSize
	rng := rand.New(rand.NewSource(f.seed))
	for i := 0; i < 40; i++ {
		sp := spots[rng.Intn(len(spots))]
		bit := rng.Intn(index.EntrySize * 8)
		fsys := f.fresh()
		if err := fsys.FlipBit(filepath.Join(dir, sp.file), int64(entries+sp.entry*index.EntrySize+bit/8), uint(bit%8)); err != nil {
			t.Fatal(err)
		}
		s, err := f.openDamaged(fsys)
		if err != nil {
			t.Fatalf("index %s entry %d bit %d: open: %v", sp.file, sp.entry, bit, err)
		}
		err = f.verify(s, corruptEntries)
		s.Close()
		if err != nil {
			t.Fatalf("index %s entry %d bit %d: %v", sp.file, sp.entry, bit, err)
		}
	}
}

// TestCorruptIndexBelowCheckpoint flips a bit in every byte of the slots
// of the index files the checkpoint covers and of the entries of those
// older than the checkpoint's (no checksum protects them), one image each,
// and queries every key
// of the image: each key is found at its message or the query fails with
// a corruption error; none is hidden. The slot count is not a power of
// two, as the default's (5,000,000) is not: a keyHash flip then always
// moves its entry to another slot, which breaks a chain the first query
// of the file checks.
func TestCorruptIndexBelowCheckpoint(t *testing.T) {
	cfg := crashConfig()
	cfg.IndexMaxHashSlots = 17
	f := newDamageFixtureWith(t, cfg)
	dir, names := f.indexFiles(t)
	type spot struct {
		file string
		at   int64 // byte offset in the file
	}
	var spots []spot
	entries := int64(index.HeaderSize + cfg.IndexMaxHashSlots*index.SlotSize)
	for _, n := range names {
		switch {
		case n > f.ckpt.Index.File:
			continue // above the checkpoint: RecoverTo removes it
		case n == f.ckpt.Index.File:
			// Its slots only: RecoverTo re-points the slots that name lost
			// entries by the entries' keyHash, which can make a flipped
			// keyHash of the entry that starts a chain consistent (FORMAT.md).
			for at := int64(index.HeaderSize); at < entries; at++ {
				spots = append(spots, spot{n, at})
			}
			continue
		}
		count := int64(f.indexHeader(t, dir, n).IndexCount)
		for at := int64(index.HeaderSize); at < entries+count*index.EntrySize; at++ {
			if at < entries || at >= entries+index.EntrySize { // entry 0 is reserved
				spots = append(spots, spot{n, at})
			}
		}
	}
	rng := rand.New(rand.NewSource(f.seed))
	tally := map[string]int{}
	step := 1
	if raceBuild { // the race detector checks concurrency, not coverage
		step = 7
	}
	repairSeen := false
	for i := 0; i < len(spots); i += step { // every byte, one seeded bit of each
		sp := spots[i]
		bit := uint(rng.Intn(8))
		part := "entry"
		if sp.at < entries {
			part = "slot"
		}
		fsys := f.fresh()
		if err := fsys.FlipBit(filepath.Join(dir, sp.file), sp.at, bit); err != nil {
			t.Fatal(err)
		}
		s, err := f.openDamaged(fsys)
		if err != nil {
			tally[part+": open refused"]++
			continue
		}
		outcome := part + ": every key found"
		refused := f.queryEveryKey(t, s, fmt.Sprintf("%s byte %d bit %d (%s)", sp.file, sp.at, bit, part))
		if refused != nil {
			outcome = part + ": query refused"
			if s.Stats().Corruptions == 0 {
				t.Fatalf("%s byte %d bit %d: a refused query not counted in Stats.Corruptions", sp.file, sp.at, bit)
			}
		}
		s.Close()
		if errors.Is(refused, index.ErrCorrupt) && !repairSeen {
			// The refusal left the rebuild marker: the next Open rebuilds
			// the index from the commitlog, and every key is found.
			repairSeen = true
			if s, err = f.openDamaged(fsys); err != nil {
				t.Fatalf("reopen after the refusal: %v", err)
			}
			if err := f.queryEveryKey(t, s, "after the rebuild"); err != nil {
				t.Fatalf("%s byte %d bit %d: after the rebuild: %v", sp.file, sp.at, bit, err)
			}
			s.Close()
		}
		tally[outcome]++
	}
	if !repairSeen {
		t.Fatal("no index damage was refused, so none was rebuilt")
	}
	t.Logf("index flips below the checkpoint, outcomes: %v", tally)
	if tally["slot: query refused"]+tally["entry: query refused"] == 0 {
		t.Fatalf("no flip was detected: %v", tally)
	}
}

// A read that finds a consume-queue unit damaged (here a tagsCode that hid
// the message from tag consumers) fails, leaves the rebuild marker, and the
// next Open rebuilds the queues from the commitlog: the message is served
// to the tag filter again and the marker is gone.
func TestDamagedUnitRebuiltAtNextOpen(t *testing.T) {
	f := newDamageFixture(t)
	victim := f.model.msgs[len(f.model.msgs)/4]
	name, at := f.unitPath(victim)
	fsys := f.fresh()
	if err := fsys.FlipBit(name, at+12, 3); err != nil { // tagsCode
		t.Fatal(err)
	}
	tag := f.tagsOf[victim.key]
	s, err := f.openDamaged(fsys)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetMessages(victim.topic, victim.queue, victim.offset, 1, 0, tag); !errors.Is(err, consumequeue.ErrCorrupt) {
		t.Fatalf("tag read of the damaged unit: %v, want consumequeue.ErrCorrupt", err)
	}
	if st := s.Stats(); st.Corruptions != 1 || !st.RebuildPending {
		t.Fatalf("stats %+v, want one corruption and a rebuild pending", st)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(f.cfg.Dir, rebuildMarker)
	if _, err := fsys.Stat(marker); err != nil {
		t.Fatalf("rebuild marker after the damaged read: %v", err)
	}
	s, err = f.openDamaged(fsys)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := f.verify(s, corruptEntries); err != nil {
		t.Fatalf("after the rebuild: %v", err)
	}
	if _, err := fsys.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("rebuild marker after the rebuild: %v, want it removed", err)
	}
}

// queryEveryKey queries each key of the model: it returns the first
// corruption error a query gives, and fails the test on any other error or
// on a key not found at its message.
func (f *damageFixture) queryEveryKey(t *testing.T, s *Store, what string) error {
	t.Helper()
	for _, msg := range f.model.msgs {
		got, err := s.QueryByKey(msg.topic, msg.key, 4, 0, 1<<62)
		if err != nil {
			if !errors.Is(err, index.ErrCorrupt) && !errors.Is(err, message.ErrCorrupt) {
				t.Fatalf("%s: key %s: %v, not a corruption error", what, msg.key, err)
			}
			return err
		}
		if len(got) != 1 || got[0].PhysicalOffset != msg.phy {
			t.Fatalf("%s: key %s (entry %d): %d hits, want its message at %d: hidden or wrong", what, msg.key, msg.entry, len(got), msg.phy)
		}
	}
	return nil
}
