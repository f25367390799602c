package store

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/raftmq/raftmq/commitlog"
)

// TestReadRefusesDamagedRecordFields flips one bit in each field of a record
// below the checkpoint (where recovery does not look) of a crashed store
// image and reads it through its consume queue: every field a read checks
// (FORMAT.md §2.3) must make GetMessages fail with a *CorruptionError that
// names the segment file and the record's offset; a field no check covers
// is served (the documented limit).
func TestReadRefusesDamagedRecordFields(t *testing.T) {
	f := newDamageFixture(t)
	victim := f.model.msgs[len(f.model.msgs)/4]
	if victim.entry >= corruptCheckpoint {
		t.Fatalf("victim entry %d is not below the checkpoint", victim.entry)
	}
	bodyEnd := int64(commitlog.OffBody + len(victim.body))
	checked := map[string]int64{
		"TOTALSIZE": commitlog.OffTotalSize + 3, "MAGICCODE": commitlog.OffMagic, "BODYCRC": commitlog.OffBodyCRC + 1,
		"QUEUEID": commitlog.OffQueueID + 3, "QUEUEOFFSET": commitlog.OffQueueOffset + 7,
		"PHYSICALOFFSET": commitlog.OffPhysicalOffset + 6, "BODYLENGTH": commitlog.OffBodyLength + 3,
		"BODY": commitlog.OffBody + 2, "TOPICLENGTH": bodyEnd, "TOPIC": bodyEnd + 1, "PROPERTIESLENGTH": bodyEnd + 1 + int64(len(victim.topic)) + 1,
	}
	unchecked := map[string]int64{
		"FLAG": commitlog.OffFlag + 3, "BORNTIMESTAMP": commitlog.OffBornTimestamp + 7, "STORETIMESTAMP": commitlog.OffStoreTimestamp + 7,
		"STOREHOST": commitlog.OffStoreHost, "PREPAREDTXOFFSET": commitlog.OffPreparedTxOffset + 7,
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
	for field, rel := range checked {
		_, err := read(field, rel)
		var ce *commitlog.CorruptionError
		switch {
		case !errors.As(err, &ce) || !errors.Is(err, commitlog.ErrCorrupt):
			t.Errorf("%s flipped: got %v, want a *commitlog.CorruptionError", field, err)
		case ce.Offset != victim.phy || filepath.Base(ce.File) != filepath.Base(f.segmentPath(victim.phy)):
			t.Errorf("%s flipped: error names %s at %d, want the segment of %d", field, ce.File, ce.Offset, victim.phy)
		}
	}
	for field, rel := range unchecked {
		r, err := read(field, rel)
		if err != nil || r.Status != Found || len(r.Messages) != 1 {
			t.Errorf("%s flipped: %v %v, want it served (FORMAT.md lists it as unchecked)", field, r.Status, err)
		}
	}
}
