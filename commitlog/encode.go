package commitlog

// encodeEntry writes an entry into buf (len(buf) == its size) at absolute
// offset start, CRC32C included, and appends each record's position to out.
func encodeEntry(buf []byte, start int64, h *EntryHeader, command []byte, msgs []Message, queueOffsets []int64, out []RecordPos) []RecordPos {
	fh := FrameHeader{
		Size: int32(FrameSize + len(command)), Kind: h.Kind, EntrySize: int32(len(buf)),
		RaftIndex: h.RaftIndex, Term: h.Term, StoreTimestamp: h.StoreTimestamp, Count: int32(len(msgs)),
	}
	_ = EncodeFrame(buf, fh)
	p := FrameSize + copy(buf[FrameSize:], command)
	if cap(out)-len(out) < len(msgs) {
		grown := make([]RecordPos, len(out), len(out)+len(msgs))
		copy(grown, out)
		out = grown
	}
	f := StoreFields{StoreTimestamp: h.StoreTimestamp, StoreHost: h.StoreHost}
	for i := range msgs {
		m := &msgs[i]
		n := MessageSize(m)
		f.QueueOffset, f.PhysicalOffset = queueOffsets[i], start+int64(p)
		encodeRecord(buf[p:p+n:p+n], m, f, checksumIEEE(m.Body))
		out = append(out, RecordPos{Offset: f.PhysicalOffset, Size: int32(n)})
		p += n
	}
	// One pass over the whole entry (still in cache) is faster than one
	// per record: the long-input CRC32C path has fewer merge steps.
	be.PutUint32(buf[FrameOffCRC:], EntryCRC(buf))
	return out
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
