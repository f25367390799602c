package store

import (
	"fmt"
	"unsafe"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/meta"
)

// Idempotent sends. A message with a PSEQ property is checked against the
// producer table (meta.Producers) before it is written: a sequence the
// table holds, or one an earlier message of the same entry carries, is a
// duplicate and is answered with the first copy's result; a sequence below
// the producer's window is refused (ErrSeqTooOld). Only the written
// records change the table (dispatchAppended, and recovery's replay of the
// same records), so every replica decides alike.

// dedup checks the message whose result is results[idx] (res) and reports
// whether it is settled without being written: a duplicate or too old.
func (a *appendScratch) dedup(s *Store, res *PutResult, idx int, pseq []byte, now int64) bool {
	if first, ok := a.entrySeqs[string(pseq)]; ok {
		res.Duplicate = true
		a.dups, a.dupOf = append(a.dups, idx), append(a.dupOf, first)
		return true
	}
	producer, seq, err := message.ParseProducerSeq(pseq)
	if err != nil { // validateForApply checked it
		res.Err = fmt.Errorf("%w: %w", ErrBadMessage, err)
		return true
	}
	switch v, off := s.meta.Producers.Lookup(producer, seq, now); v {
	case meta.SeqTooOld:
		res.Err = fmt.Errorf("%w: producer %q sequence %d (it keeps the newest %d)", ErrSeqTooOld, producer, seq, s.meta.Producers.Config.Window)
		return true
	case meta.SeqDuplicate:
		res.PhysicalOffset, res.Duplicate = off, true
		a.dups, a.dupOf = append(a.dups, idx), append(a.dupOf, -1)
		return true
	}
	return false
}

// fillDuplicates answers each duplicate of an entry with its first copy's
// result: from this entry's results, or read back from the commitlog. A
// first copy that retention has removed keeps only its offset.
func (s *Store) fillDuplicates(results []PutResult) {
	a := &s.scratch
	for k, i := range a.dups {
		r := &results[i]
		if first := a.dupOf[k]; first >= 0 {
			*r = results[first]
			r.Duplicate = true
			continue
		}
		m, err := s.readMessage(r.PhysicalOffset)
		if err != nil {
			continue
		}
		r.Topic, r.QueueID, r.QueueOffset, r.Size, r.StoreTimestamp = m.Topic, m.QueueID, m.QueueOffset, m.Size, m.StoreTimestamp
		id := message.AppendOffsetMsgID(nil, m.StoreHost, m.PhysicalOffset)
		r.OffsetMsgID = unsafe.String(&id[0], len(id))
		r.MsgID = r.OffsetMsgID
		if uniq := readStoreProps(m.Properties).uniq; len(uniq) > 0 {
			r.MsgID = string(uniq)
		}
	}
	s.counters.dedupHits.Add(uint64(len(a.dups)))
}
