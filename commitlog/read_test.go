package commitlog

import (
	"errors"
	"fmt"
	"testing"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/vfs"
)

// recordField names the field of a v1 record that byte off belongs to.
func recordField(off, bodyLen, topicLen int) string {
	fixed := []struct {
		end  int
		name string
	}{
		{message.OffMagic, "TOTALSIZE"}, {message.OffBodyCRC, "MAGICCODE"}, {message.OffQueueID, "BODYCRC"}, {message.OffFlag, "QUEUEID"},
		{message.OffQueueOffset, "FLAG"}, {message.OffPhysicalOffset, "QUEUEOFFSET"}, {message.OffSysFlag, "PHYSICALOFFSET"},
		{message.OffBornTimestamp, "SYSFLAG"}, {message.OffBornHost, "BORNTIMESTAMP"}, {message.OffStoreTimestamp, "BORNHOST"},
		{message.OffStoreHost, "STORETIMESTAMP"}, {message.OffReconsumeTimes, "STOREHOST"}, {message.OffPreparedTxOffset, "RECONSUMETIMES"},
		{message.OffBodyLength, "PREPAREDTXOFFSET"}, {message.OffBody, "BODYLENGTH"},
	}
	for _, f := range fixed {
		if off < f.end {
			return f.name
		}
	}
	switch p := off - message.OffBody; {
	case p < bodyLen:
		return "BODY"
	case p == bodyLen:
		return "TOPICLENGTH"
	case p < bodyLen+1+topicLen:
		return "TOPIC"
	case p < bodyLen+1+topicLen+2:
		return "PROPERTIESLENGTH"
	}
	return "PROPERTIES"
}

// reset forgets every verified entry, as a new process opening the files.
func (v *verified) reset() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.segs = nil
}

// TestReadRecordRefBitFlips flips every bit of a stored record, one at a
// time, and reads it through its consume-queue reference as a process that
// did not write it: every flip is refused with a *CorruptionError naming
// the segment file and the record's or its entry's offset — the fields no
// per-record check covers (FLAG, hosts, timestamps, properties) by the
// entry's CRC32C.
func TestReadRecordRefBitFlips(t *testing.T) {
	l := openTestLog(t, vfs.NewMem(), 1<<20)
	props, err := message.EncodeProperties(message.Property{Key: message.PropertyTags, Value: "TagA"}, message.Property{Key: message.PropertyKeys, Value: "k1 k2"},
		message.Property{Key: message.PropertyUniqKey, Value: "7F0000010B5C18B4AAC2470E0B820000"})
	if err != nil {
		t.Fatal(err)
	}
	msgs := make([]message.Message, 3)
	for i := range msgs {
		body := make([]byte, 300)
		for j := range body {
			body[j] = byte(i*31 + j)
		}
		msgs[i] = message.Message{Topic: "FlipTopic", QueueID: 2, Flag: 7, SysFlag: 1, BornTimestamp: 1700000000000 + int64(i),
			BornHost: testHost, ReconsumeTimes: 1, PreparedTxOffset: 5, Body: body, Properties: props}
	}
	h := EntryHeader{Kind: message.KindMessages, RaftIndex: 1, Term: 1, StoreTimestamp: 1700000000123, StoreHost: testHost}
	start, pos, err := l.AppendEntry(h, nil, msgs, []int64{10, 11, 12}, nil)
	if err != nil {
		t.Fatal(err)
	}
	target := pos[1] // a record with records on both sides
	ref := RecordRef{Offset: target.Offset, Size: target.Size, Topic: "FlipTopic", QueueID: 2, QueueOffset: 11}
	l.trust.reset()
	if _, err := l.ReadRecordRef(ref); err != nil {
		t.Fatalf("clean read: %v", err)
	}
	seg, _ := l.q.Find(target.Offset)
	rec := seg.File.Bytes()[target.Offset-seg.Start:][:target.Size]

	refused := map[string]int{}
	for off := range rec {
		field := recordField(off, len(msgs[1].Body), len("FlipTopic"))
		for bit := 0; bit < 8; bit++ {
			rec[off] ^= 1 << bit
			l.trust.reset()
			_, err := l.ReadRecordRef(ref)
			rec[off] ^= 1 << bit
			where := fmt.Sprintf("byte %d (%s) bit %d", off, field, bit)
			var ce *CorruptionError
			switch {
			case err == nil:
				t.Errorf("%s: flipped bit served", where)
			case !errors.As(err, &ce) || !errors.Is(err, message.ErrCorrupt):
				t.Errorf("%s: error %v is not a *CorruptionError", where, err)
			case ce.File != seg.File.Name() || ce.Offset != target.Offset && ce.Offset != start:
				t.Errorf("%s: error names %s at %d, want %s at %d or its entry's %d", where, ce.File, ce.Offset, seg.File.Name(), target.Offset, start)
			default:
				refused[field]++
			}
		}
	}
	t.Logf("bits refused per field: %v", refused)
	l.trust.reset()
	if _, err := l.ReadRecordRef(ref); err != nil {
		t.Fatalf("record not restored: %v", err)
	}
}

// Entries this process appended are served without a CRC pass; others are
// verified once per process, each read checking the entries from the
// nearest verified one below it (or searching backward for its own frame
// when that is far): damage in one entry fails only the reads of its
// records, and a flip after an entry was verified is not seen again until
// the next process (raftmq verify finds it).
func TestReadVerifiesEntriesOnce(t *testing.T) {
	l := openTestLog(t, vfs.NewMem(), 1<<20)
	var starts []int64
	var refs []RecordRef
	for i := range 3 {
		msgs := []message.Message{{Topic: "T", QueueID: 0, Body: fmt.Appendf(nil, "entry %d", i), Properties: []byte("KEYS\x01k\x02")}}
		start, pos, err := l.AppendEntry(EntryHeader{Kind: message.KindMessages, RaftIndex: uint64(i + 1), Term: 1}, nil, msgs, []int64{int64(i)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		starts = append(starts, start)
		refs = append(refs, RecordRef{Offset: pos[0].Offset, Size: pos[0].Size, Topic: "T", QueueID: 0, QueueOffset: int64(i)})
	}
	seg, _ := l.q.Find(starts[0])
	data := seg.File.Bytes()
	flip := func(i int) { data[refs[i].Offset+int64(refs[i].Size)-1-seg.Start] ^= 1 } // the last property byte
	read := func(i int) error { _, err := l.ReadRecordRef(refs[i]); return err }
	isCorrupt := func(err error, at int64) bool {
		var ce *CorruptionError
		return errors.As(err, &ce) && ce.Offset == at
	}

	flip(2)
	if err := read(2); err != nil {
		t.Fatalf("an appended entry was checked again: %v", err)
	}
	flip(2)

	l.trust.reset()
	flip(0)
	if err := read(0); !isCorrupt(err, starts[0]) {
		t.Fatalf("damaged entry 0: %v, want a *CorruptionError at %d", err, starts[0])
	}
	for i := 1; i < 3; i++ {
		if err := read(i); err != nil {
			t.Fatalf("entry %d behind a damaged entry 0: %v, want it served", i, err)
		}
	}
	flip(0)
	if err := read(0); err != nil {
		t.Fatalf("entry 0 after the repair: %v", err)
	}
	flip(0)
	if err := read(0); err != nil {
		t.Fatalf("entry 0 was verified before its flip: %v, want it served (verified once a process)", err)
	}
	flip(0)

	// Far from any verified entry, a read searches back for its own frame
	// and verifies that entry alone.
	l.trust.reset()
	l.trust.walk = 0
	if err := read(2); err != nil {
		t.Fatalf("entry 2 found by the backward search: %v", err)
	}
	flip(1)
	if err := read(1); !isCorrupt(err, refs[1].Offset) && !isCorrupt(err, starts[1]) {
		t.Fatalf("damaged entry 1, not verified by entry 2's search: %v, want a *CorruptionError", err)
	}
	if err := read(2); err != nil {
		t.Fatalf("entry 2 again: %v", err)
	}
	flip(1)
}

// TestReadRecordRefMismatch: a unit that names another queue, offset, topic
// or size than the record holds is refused; a unit pointing at a frame too.
func TestReadRecordRefMismatch(t *testing.T) {
	l := openTestLog(t, vfs.NewMem(), 1<<20)
	msgs := []message.Message{{Topic: "T", QueueID: 1, Body: []byte("hello")}, {Topic: "T", QueueID: 1, Body: []byte("world")}}
	start, pos, err := l.AppendEntry(EntryHeader{Kind: message.KindMessages, RaftIndex: 1, Term: 1}, nil, msgs, []int64{4, 5}, nil)
	if err != nil {
		t.Fatal(err)
	}
	good := RecordRef{Offset: pos[0].Offset, Size: pos[0].Size, Topic: "T", QueueID: 1, QueueOffset: 4}
	if _, err := l.ReadRecordRef(good); err != nil {
		t.Fatal(err)
	}
	bad := map[string]RecordRef{}
	r := good
	r.QueueID = 2
	bad["queue id"] = r
	r = good
	r.QueueOffset = 5
	bad["queue offset"] = r
	r = good
	r.Topic = "U"
	bad["topic"] = r
	r = good
	r.Size++
	bad["size"] = r
	bad["frame"] = RecordRef{Offset: start, Size: pos[0].Size, Topic: "T", QueueID: 1, QueueOffset: 4}
	bad["other record"] = RecordRef{Offset: pos[1].Offset, Size: pos[1].Size, Topic: "T", QueueID: 1, QueueOffset: 4}
	bad["past the data"] = RecordRef{Offset: pos[1].Offset, Size: pos[1].Size + 1, Topic: "T", QueueID: 1, QueueOffset: 5}
	for name, ref := range bad {
		var ce *CorruptionError
		if _, err := l.ReadRecordRef(ref); !errors.As(err, &ce) || ce.Offset != ref.Offset {
			t.Errorf("%s: got %v, want a *CorruptionError at %d", name, err, ref.Offset)
		}
	}
	if _, err := l.ReadRecordRef(RecordRef{Offset: l.WriteOffset(), Size: 100}); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("beyond the write offset: %v, want ErrOutOfRange", err)
	}
}
