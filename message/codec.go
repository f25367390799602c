package message

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
)

var be = binary.BigEndian

// castagnoli is the CRC32C table (hardware accelerated where available).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Record is a decoded message record. Body, Topic and Properties alias the
// bytes it was decoded from (the mapping): copy them to keep them.
type Record struct {
	Size             int32 // TOTALSIZE
	BodyCRC          uint32
	QueueID          int32
	Flag             int32
	QueueOffset      int64
	PhysicalOffset   int64
	SysFlag          int32
	BornTimestamp    int64
	BornHost         HostPort
	StoreTimestamp   int64
	StoreHost        HostPort
	ReconsumeTimes   int32
	PreparedTxOffset int64
	Body             []byte
	Topic            []byte
	Properties       []byte
}

// StoreFields are the record fields the store fills in, not the producer.
type StoreFields struct {
	QueueOffset    int64
	PhysicalOffset int64
	StoreTimestamp int64
	StoreHost      HostPort
}

// RecordSize is TOTALSIZE of a record with these lengths.
func RecordSize(bodyLen, topicLen, propsLen int) int {
	return RecordFixedSize + bodyLen + topicLen + propsLen
}

// MessageSize is RecordSize for m.
func MessageSize(m *Message) int {
	return RecordSize(len(m.Body), len(m.Topic), len(m.Properties))
}

func putHost(b []byte, h HostPort) {
	copy(b[:4], h.IP[:])
	be.PutUint32(b[4:8], uint32(h.Port))
}

func getHost(b []byte) HostPort {
	var h HostPort
	copy(h.IP[:], b[:4])
	h.Port = int32(be.Uint32(b[4:8]))
	return h
}

// CheckLengths rejects what the layout cannot represent (topic, body and
// properties lengths, IPv6 sysflag bits).
func CheckLengths(m *Message) error {
	switch {
	case len(m.Topic) == 0 || len(m.Topic) > MaxTopicLen:
		return fmt.Errorf("%w: length %d", ErrBadTopic, len(m.Topic))
	case len(m.Body) > MaxBodySize:
		return fmt.Errorf("%w: %d bytes", ErrBodyTooLarge, len(m.Body))
	case len(m.Properties) > MaxPropertiesLen:
		return fmt.Errorf("%w: %d bytes", ErrPropertiesTooLarge, len(m.Properties))
	case m.SysFlag&(SysFlagBornHostV6|SysFlagStoreHostV6) != 0:
		return fmt.Errorf("%w: %#x", ErrBadSysFlag, m.SysFlag)
	}
	return nil
}

// EncodeRecord writes m as a v1 record at the start of dst and returns its
// size. It computes the body CRC and does not allocate. dst must hold
// MessageSize(m) bytes (ErrShortBuffer). Only the representable lengths are
// checked here; ValidateMessage checks the rest.
func EncodeRecord(dst []byte, m *Message, f StoreFields) (int, error) {
	if err := CheckLengths(m); err != nil {
		return 0, err
	}
	n := MessageSize(m)
	if len(dst) < n {
		return 0, ErrShortBuffer
	}
	encodeRecord(dst[:n], m, f, checksumIEEE(m.Body))
	return n, nil
}

// PutRecord writes m as a record of exactly len(b) == MessageSize(m) bytes,
// body CRC included, without checking lengths (see CheckLengths): the
// writer's path, which sized b itself.
func PutRecord(b []byte, m *Message, f StoreFields) { encodeRecord(b, m, f, checksumIEEE(m.Body)) }

// encodeRecord writes a record of exactly len(b) bytes.
func encodeRecord(b []byte, m *Message, f StoreFields, bodyCRC uint32) {
	encodeHeader(b, len(b), m, f, bodyCRC)
	putVariable(b, m.Body, m.Topic, m.Properties)
}

// putVariable writes BODY, TOPICLENGTH, TOPIC, PROPERTIESLENGTH and
// PROPERTIES after a record's fixed part.
func putVariable[T string | []byte](b, body []byte, topic T, props []byte) {
	p := OffBody + copy(b[OffBody:], body)
	b[p] = byte(len(topic))
	p += 1 + copy(b[p+1:], topic)
	be.PutUint16(b[p:], uint16(len(props)))
	copy(b[p+2:], props)
}

// AppendRecord appends r to dst as a v1 record: for a record read from the
// commitlog, the bytes the commitlog holds for it, every field as stored and
// BODYCRC copied rather than recomputed (a Pull answer packs records so).
// r.Size is not used: TOTALSIZE follows from the lengths.
func AppendRecord(dst []byte, r *Record) []byte {
	size := RecordSize(len(r.Body), len(r.Topic), len(r.Properties))
	p := len(dst)
	dst = slices.Grow(dst, size)[:p+size]
	b := dst[p:]
	m := Message{QueueID: r.QueueID, Flag: r.Flag, SysFlag: r.SysFlag, BornTimestamp: r.BornTimestamp,
		BornHost: r.BornHost, ReconsumeTimes: r.ReconsumeTimes, PreparedTxOffset: r.PreparedTxOffset, Body: r.Body}
	f := StoreFields{QueueOffset: r.QueueOffset, PhysicalOffset: r.PhysicalOffset, StoreTimestamp: r.StoreTimestamp, StoreHost: r.StoreHost}
	encodeHeader(b, size, &m, f, r.BodyCRC)
	putVariable(b, r.Body, r.Topic, r.Properties)
	return dst
}

// DecodeRecord decodes the record at the start of b (b may run on past it)
// and checks it whole: TOTALSIZE bounds, magic, every length against
// TOTALSIZE, and the body CRC. The result aliases b. Errors match ErrCorrupt.
func DecodeRecord(b []byte) (Record, error) {
	r, err := decodeRecord(b)
	if err != nil {
		return r, err
	}
	if crc := checksumIEEE(r.Body); crc != r.BodyCRC {
		return r, fmt.Errorf("%w: stored %#08x, computed %#08x", ErrBodyCRC, r.BodyCRC, crc)
	}
	return r, nil
}

// DecodeRecordSkipBodyCRC is DecodeRecord without the body CRC: for a record
// inside an entry whose CRC32C was verified, which covers the body already.
func DecodeRecordSkipBodyCRC(b []byte) (Record, error) { return decodeRecord(b) }

// decodeRecord is DecodeRecord without the body CRC.
func decodeRecord(b []byte) (Record, error) {
	var r Record
	l, err := checkLayout(b)
	if err != nil {
		return r, err
	}
	b = b[:l.size]
	r.Size, r.SysFlag = l.size, l.sysFlag
	r.Body = b[OffBody : l.topicAt-1 : l.topicAt-1]
	r.Topic = b[l.topicAt : l.propsAt-2 : l.propsAt-2]
	r.Properties = b[l.propsAt:len(b):len(b)]
	decodeFixed(&r, b)
	return r, nil
}

// recordLayout is where the variable parts of a record lie.
type recordLayout struct {
	size    int32 // TOTALSIZE
	sysFlag int32
	topicAt int // the topic's first byte (TOPICLENGTH is the byte before)
	propsAt int // the properties' first byte (PROPERTIESLENGTH is the two before)
}

// checkLayout checks the structure of the record at the start of b:
// TOTALSIZE bounds, magic, no IPv6 flags, and every length against
// TOTALSIZE. Errors match ErrCorrupt.
func checkLayout(b []byte) (recordLayout, error) {
	var l recordLayout
	if len(b) < RecordFixedSize {
		return l, fmt.Errorf("%w: %d bytes left", ErrShort, len(b))
	}
	if m := be.Uint32(b[OffMagic:]); m != MagicMessageV1 {
		return l, fmt.Errorf("%w: %#08x", ErrBadMagic, m)
	}
	size := int32(be.Uint32(b[OffTotalSize:]))
	if size < RecordFixedSize || size > MaxRecordSize {
		return l, fmt.Errorf("%w: TOTALSIZE %d", ErrBadSize, size)
	}
	if int(size) > len(b) {
		return l, fmt.Errorf("%w: TOTALSIZE %d, %d bytes left", ErrShort, size, len(b))
	}
	b = b[:size]
	l.size = size
	l.sysFlag = int32(be.Uint32(b[OffSysFlag:]))
	if l.sysFlag&(SysFlagBornHostV6|SysFlagStoreHostV6) != 0 {
		return l, fmt.Errorf("%w: IPv6 sysflag %#x", ErrBadLength, l.sysFlag)
	}
	bodyLen := int32(be.Uint32(b[OffBodyLength:]))
	if bodyLen < 0 || bodyLen > MaxBodySize || int(bodyLen) > len(b)-RecordFixedSize {
		return l, fmt.Errorf("%w: BODYLENGTH %d in a %d-byte record", ErrBadLength, bodyLen, len(b))
	}
	p := OffBody + int(bodyLen)
	topicLen := int(int8(b[p]))
	if topicLen <= 0 || p+1+topicLen+2 > len(b) {
		return l, fmt.Errorf("%w: TOPICLENGTH %d", ErrBadLength, topicLen)
	}
	l.topicAt = p + 1
	p += 1 + topicLen
	propsLen := int(int16(be.Uint16(b[p:])))
	if propsLen < 0 || p+2+propsLen != len(b) {
		return l, fmt.Errorf("%w: PROPERTIESLENGTH %d, body %d, topic %d, TOTALSIZE %d",
			ErrBadLength, propsLen, bodyLen, topicLen, len(b))
	}
	l.propsAt = p + 2
	return l, nil
}

// RecordHead is what a scan of the commitlog checks of each record against
// its entry, besides its structure.
type RecordHead struct {
	Size           int32 // TOTALSIZE
	PhysicalOffset int64
	StoreTimestamp int64
	StoreHost      HostPort
}

// CheckRecord checks the structure of the record at the start of b as
// DecodeRecordSkipBodyCRC does (TOTALSIZE bounds, magic, every length
// against TOTALSIZE) and returns its head, without decoding the rest: the
// commitlog's verifying scan, over records whose entry CRC32C it checked.
// It reads b only up to BODYLENGTH and from the end of the body on, never
// the body (the commitlog's sparse scan passes records whose body it did
// not read). Errors match ErrCorrupt.
func CheckRecord(b []byte) (RecordHead, error) {
	l, err := checkLayout(b)
	if err != nil {
		return RecordHead{}, err
	}
	return RecordHead{Size: l.size, PhysicalOffset: int64(be.Uint64(b[OffPhysicalOffset:])),
		StoreTimestamp: int64(be.Uint64(b[OffStoreTimestamp:])), StoreHost: getHost(b[OffStoreHost:])}, nil
}

func decodeFixed(r *Record, b []byte) {
	r.BodyCRC = be.Uint32(b[OffBodyCRC:])
	r.QueueID = int32(be.Uint32(b[OffQueueID:]))
	r.Flag = int32(be.Uint32(b[OffFlag:]))
	r.QueueOffset = int64(be.Uint64(b[OffQueueOffset:]))
	r.PhysicalOffset = int64(be.Uint64(b[OffPhysicalOffset:]))
	r.BornTimestamp = int64(be.Uint64(b[OffBornTimestamp:]))
	r.BornHost = getHost(b[OffBornHost:])
	r.StoreTimestamp = int64(be.Uint64(b[OffStoreTimestamp:]))
	r.StoreHost = getHost(b[OffStoreHost:])
	r.ReconsumeTimes = int32(be.Uint32(b[OffReconsumeTimes:]))
	r.PreparedTxOffset = int64(be.Uint64(b[OffPreparedTxOffset:]))
}

// FrameHeader is the fixed part of a frame record.
type FrameHeader struct {
	Size           int32 // TOTALSIZE: FrameSize + command payload
	Kind           Kind
	EntrySize      int32 // frame + payload + message records
	RaftIndex      uint64
	Term           uint64
	StoreTimestamp int64
	Count          int32 // message records after the frame
	CRC            uint32
}

// EncodeFrame writes h (with MAGICCODE and VERSION) into dst[:FrameSize].
func EncodeFrame(dst []byte, h FrameHeader) error {
	if len(dst) < FrameSize {
		return ErrShortBuffer
	}
	b := dst[:FrameSize]
	be.PutUint32(b[FrameOffTotalSize:], uint32(h.Size))
	be.PutUint32(b[FrameOffMagic:], MagicFrame)
	b[FrameOffVersion] = FrameVersion
	b[FrameOffKind] = byte(h.Kind)
	be.PutUint16(b[FrameOffReserved:], 0)
	be.PutUint32(b[FrameOffEntrySize:], uint32(h.EntrySize))
	be.PutUint64(b[FrameOffRaftIndex:], h.RaftIndex)
	be.PutUint64(b[FrameOffTerm:], h.Term)
	be.PutUint64(b[FrameOffStoreTimestamp:], uint64(h.StoreTimestamp))
	be.PutUint32(b[FrameOffCount:], uint32(h.Count))
	be.PutUint32(b[FrameOffCRC:], h.CRC)
	return nil
}

// DecodeFrame decodes and checks the frame header at the start of b: magic,
// version, kind, reserved bits, sizes and the kind rules. It does not check
// the CRC (that needs the whole entry: EntryCRC).
func DecodeFrame(b []byte) (FrameHeader, error) {
	var h FrameHeader
	if len(b) < FrameSize {
		return h, fmt.Errorf("%w: %d bytes left for a frame", ErrShort, len(b))
	}
	if m := be.Uint32(b[FrameOffMagic:]); m != MagicFrame {
		return h, fmt.Errorf("%w: %#08x", ErrBadMagic, m)
	}
	if v := b[FrameOffVersion]; v != FrameVersion {
		return h, fmt.Errorf("%w: version %d", ErrBadFrame, v)
	}
	if r := be.Uint16(b[FrameOffReserved:]); r != 0 {
		return h, fmt.Errorf("%w: reserved %#x", ErrBadFrame, r)
	}
	h = FrameHeader{
		Size:           int32(be.Uint32(b[FrameOffTotalSize:])),
		Kind:           Kind(b[FrameOffKind]),
		EntrySize:      int32(be.Uint32(b[FrameOffEntrySize:])),
		RaftIndex:      be.Uint64(b[FrameOffRaftIndex:]),
		Term:           be.Uint64(b[FrameOffTerm:]),
		StoreTimestamp: int64(be.Uint64(b[FrameOffStoreTimestamp:])),
		Count:          int32(be.Uint32(b[FrameOffCount:])),
		CRC:            be.Uint32(b[FrameOffCRC:]),
	}
	return h, h.check()
}

// check applies the size and kind rules of the frame layout.
func (h *FrameHeader) check() error {
	switch {
	case !h.Kind.Valid():
		return fmt.Errorf("%w: kind %d", ErrBadFrame, h.Kind)
	case h.Size < FrameSize || h.Size > FrameSize+MaxCommandSize:
		return fmt.Errorf("%w: TOTALSIZE %d", ErrBadSize, h.Size)
	case h.EntrySize < h.Size:
		return fmt.Errorf("%w: ENTRYSIZE %d < TOTALSIZE %d", ErrBadSize, h.EntrySize, h.Size)
	case h.Count < 0 || int64(h.Count)*RecordFixedSize > int64(h.EntrySize-h.Size):
		return fmt.Errorf("%w: COUNT %d in %d bytes", ErrBadFrame, h.Count, h.EntrySize-h.Size)
	case h.Kind != KindCommand && h.Size != FrameSize:
		return fmt.Errorf("%w: kind %d with a %d-byte payload", ErrBadFrame, h.Kind, h.Size-FrameSize)
	case h.Kind != KindMessages && (h.Count != 0 || h.EntrySize != h.Size):
		return fmt.Errorf("%w: kind %d with records", ErrBadFrame, h.Kind)
	}
	return nil
}

// EntryCRC is the CRC32C of a whole entry (frame first, len(entry) ==
// ENTRYSIZE) without its CRC field: crc over [0,44) continued over
// [48,ENTRYSIZE).
func EntryCRC(entry []byte) uint32 {
	crc := updateCastagnoli(0, entry[:FrameOffCRC])
	return updateCastagnoli(crc, entry[FrameSize:])
}

// encodeHeader writes the fixed part of a record of size bytes, up to and
// including BODYLENGTH, into b[:OffBody].
func encodeHeader(b []byte, size int, m *Message, f StoreFields, bodyCRC uint32) {
	_ = b[OffBody-1]
	be.PutUint32(b[OffTotalSize:], uint32(size))
	be.PutUint32(b[OffMagic:], MagicMessageV1)
	be.PutUint32(b[OffBodyCRC:], bodyCRC)
	be.PutUint32(b[OffQueueID:], uint32(m.QueueID))
	be.PutUint32(b[OffFlag:], uint32(m.Flag))
	be.PutUint64(b[OffQueueOffset:], uint64(f.QueueOffset))
	be.PutUint64(b[OffPhysicalOffset:], uint64(f.PhysicalOffset))
	be.PutUint32(b[OffSysFlag:], uint32(m.SysFlag))
	be.PutUint64(b[OffBornTimestamp:], uint64(m.BornTimestamp))
	putHost(b[OffBornHost:], m.BornHost)
	be.PutUint64(b[OffStoreTimestamp:], uint64(f.StoreTimestamp))
	putHost(b[OffStoreHost:], f.StoreHost)
	be.PutUint32(b[OffReconsumeTimes:], uint32(m.ReconsumeTimes))
	be.PutUint64(b[OffPreparedTxOffset:], uint64(m.PreparedTxOffset))
	be.PutUint32(b[OffBodyLength:], uint32(len(m.Body)))
}
