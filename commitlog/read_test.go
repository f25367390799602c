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

// uncheckedFields are the record fields no read check covers (FORMAT.md
// §2.3): a bit flip there is served. SYSFLAG is covered only for its IPv6
// bits.
var uncheckedFields = map[string]bool{
	"FLAG": true, "BORNTIMESTAMP": true, "BORNHOST": true, "STORETIMESTAMP": true, "STOREHOST": true,
	"RECONSUMETIMES": true, "PREPAREDTXOFFSET": true, "PROPERTIES": true,
}

// TestReadRecordRefBitFlips flips every bit of a stored record, one at a
// time, and reads it through its consume-queue reference: a flip in any
// checked field must be refused with a *CorruptionError naming the segment
// file and the record's offset, and a flip in a field no check covers is
// served (that is the documented limit, pinned here so the documentation
// stays true).
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
	_, pos, err := l.AppendEntry(h, nil, msgs, []int64{10, 11, 12}, nil)
	if err != nil {
		t.Fatal(err)
	}
	target := pos[1] // a record with records on both sides
	ref := RecordRef{Offset: target.Offset, Size: target.Size, Topic: "FlipTopic", QueueID: 2, QueueOffset: 11}
	if _, err := l.ReadRecordRef(ref); err != nil {
		t.Fatalf("clean read: %v", err)
	}
	seg, _ := l.q.Find(target.Offset)
	rec := seg.File.Bytes()[target.Offset-seg.Start:][:target.Size]

	served := map[string]int{}
	for off := range rec {
		field := recordField(off, len(msgs[1].Body), len("FlipTopic"))
		for bit := 0; bit < 8; bit++ {
			rec[off] ^= 1 << bit
			_, err := l.ReadRecordRef(ref)
			rec[off] ^= 1 << bit
			ipv6Bit := field == "SYSFLAG" && off == message.OffSysFlag+3 && (bit == 4 || bit == 5)
			unchecked := uncheckedFields[field] || field == "SYSFLAG" && !ipv6Bit
			where := fmt.Sprintf("byte %d (%s) bit %d", off, field, bit)
			if unchecked {
				if err != nil {
					t.Errorf("%s: refused (%v), but FORMAT.md lists the field as unchecked: update both", where, err)
				}
				served[field]++
				continue
			}
			var ce *CorruptionError
			switch {
			case err == nil:
				t.Errorf("%s: flipped bit served", where)
			case !errors.As(err, &ce) || !errors.Is(err, message.ErrCorrupt):
				t.Errorf("%s: error %v is not a *CorruptionError", where, err)
			case ce.File != seg.File.Name() || ce.Offset != target.Offset:
				t.Errorf("%s: error names %s at %d, want %s at %d", where, ce.File, ce.Offset, seg.File.Name(), target.Offset)
			}
		}
	}
	t.Logf("bits served per unchecked field: %v", served)
	if _, err := l.ReadRecordRef(ref); err != nil {
		t.Fatalf("record not restored: %v", err)
	}
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
