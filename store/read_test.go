package store

import (
	"errors"
	"math/rand"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/vfs"
)

// TestReadRefusesDamagedRecordFields flips one bit in each field of a record
// below the checkpoint (where recovery does not look) of a crashed store
// image and reads it through its consume queue: every field must make
// GetMessages fail with a *CorruptionError that names the segment file and
// the record's offset (a per-record check, FORMAT.md §2.3) or its entry's
// (the entry's CRC32C, for the fields no per-record check covers).
func TestReadRefusesDamagedRecordFields(t *testing.T) {
	f := newDamageFixture(t)
	victim := f.model.msgs[len(f.model.msgs)/4]
	if victim.entry >= corruptCheckpoint {
		t.Fatalf("victim entry %d is not below the checkpoint", victim.entry)
	}
	bodyEnd := int64(message.OffBody + len(victim.body))
	fields := map[string]int64{
		"TOTALSIZE": message.OffTotalSize + 3, "MAGICCODE": message.OffMagic, "BODYCRC": message.OffBodyCRC + 1,
		"QUEUEID": message.OffQueueID + 3, "QUEUEOFFSET": message.OffQueueOffset + 7,
		"PHYSICALOFFSET": message.OffPhysicalOffset + 6, "BODYLENGTH": message.OffBodyLength + 3,
		"BODY": message.OffBody + 2, "TOPICLENGTH": bodyEnd, "TOPIC": bodyEnd + 1, "PROPERTIESLENGTH": bodyEnd + 1 + int64(len(victim.topic)) + 1,
		"FLAG": message.OffFlag + 3, "BORNTIMESTAMP": message.OffBornTimestamp + 7, "STORETIMESTAMP": message.OffStoreTimestamp + 7,
		"STOREHOST": message.OffStoreHost, "PREPAREDTXOFFSET": message.OffPreparedTxOffset + 7,
		"PROPERTIES": bodyEnd + 1 + int64(len(victim.topic)) + 2 + 1,
	}
	read := func(field string, rel int64) (GetResult, error) {
		fsys := f.fresh()
		phy := victim.phy + rel
		if err := fsys.FlipBit(f.segmentPath(phy), phy%f.cfg.CommitLogFileSize, 0); err != nil {
			t.Fatal(err)
		}
		s, err := f.openDamaged(fsys)
		if err != nil {
			t.Fatalf("%s: open: %v", field, err)
		}
		defer s.Close()
		return s.GetMessages(victim.topic, victim.queue, victim.offset, 1, 0, "")
	}
	for field, rel := range fields {
		_, err := read(field, rel)
		var ce *commitlog.CorruptionError
		switch {
		case !errors.As(err, &ce) || !errors.Is(err, message.ErrCorrupt):
			t.Errorf("%s flipped: got %v, want a *commitlog.CorruptionError", field, err)
		case filepath.Base(ce.File) != filepath.Base(f.segmentPath(victim.phy)):
			t.Errorf("%s flipped: error names %s, want the segment of %d", field, ce.File, victim.phy)
		case ce.Offset != victim.phy && !(errors.Is(err, message.ErrEntryCRC) && ce.Offset < victim.phy):
			t.Errorf("%s flipped: error %v at %d, want the record's offset %d or its entry's CRC32C", field, err, ce.Offset, victim.phy)
		}
	}
}

// TestReadMessagesMatchesGetMessages: the zero-copy read hands fn exactly
// the messages GetMessages copies out (same order, fields, bodies and
// properties, with and without a tag filter, across queue offsets) and
// reports the same status and offsets; an error from fn ends the read.
func TestReadMessagesMatchesGetMessages(t *testing.T) {
	s := mustOpen(t, vfs.NewMem(), smallConfig("/data/store"))
	defer s.Close()
	rng := rand.New(rand.NewSource(testSeed(t)))
	for i := uint64(1); i <= 30; i++ {
		msgs := make([]message.Message, 1+rng.Intn(5))
		for j := range msgs {
			msgs[j] = testMessage("view", int32(rng.Intn(2)), int(i)*10+j, rng)
		}
		if _, err := s.AppendMessages(header(i), msgs, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, tag := range []string{"", "red", "blue||red", "none"} {
		for q := int32(0); q < 2; q++ {
			for off := int64(0); ; {
				want, err := s.GetMessages("view", q, off, 7, 0, tag)
				if err != nil {
					t.Fatal(err)
				}
				var got []Message
				res, err := s.ReadMessages("view", q, off, 7, 0, tag, func(r *message.Record) error {
					var m Message
					copyRecord(&m, r, string(r.Topic), nil)
					got = append(got, m)
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if res.Status != want.Status || res.NextOffset != want.NextOffset || res.MinOffset != want.MinOffset || res.MaxOffset != want.MaxOffset || res.Messages != nil {
					t.Fatalf("tag %q queue %d offset %d: result %+v, want %+v", tag, q, off, res, want)
				}
				if !reflect.DeepEqual(got, want.Messages) && (len(got) != 0 || len(want.Messages) != 0) {
					t.Fatalf("tag %q queue %d offset %d: views differ from the copies", tag, q, off)
				}
				if want.Status != Found && want.Status != NoMatchedMessage {
					break
				}
				off = want.NextOffset
			}
		}
	}
	stop := errors.New("stop")
	calls := 0
	if _, err := s.ReadMessages("view", 0, 0, 100, 0, "", func(*message.Record) error { calls++; return stop }); !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("fn error: got %v after %d calls, want stop after 1", err, calls)
	}
}
