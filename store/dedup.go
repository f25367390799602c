package store

import (
	"fmt"

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

// dedup checks the message m (props sp) whose result is results[idx]
// (res) and reports whether it is settled without being written: a
// duplicate or too old.
func (a *appendScratch) dedup(s *Store, res *PutResult, idx int, m *message.Message, sp *storeProps, now int64) bool {
	if first, ok := a.entrySeqs[string(sp.pseq)]; ok {
		res.Duplicate = true
		a.dups = append(a.dups, dupRef{result: idx, first: first})
		return true
	}
	producer, seq, err := message.ParseProducerSeq(sp.pseq)
	if err != nil { // validateForApply checked it
		res.Err = fmt.Errorf("%w: %w", ErrBadMessage, err)
		return true
	}
	switch s.meta.Producers.Lookup(producer, seq, now) {
	case meta.SeqTooOld:
		res.Err = fmt.Errorf("%w: producer %q sequence %d (it keeps the newest %d)", ErrSeqTooOld, producer, seq, s.meta.Producers.Config.Window)
		return true
	case meta.SeqDuplicate:
		res.Duplicate = true
		a.dups = append(a.dups, dupRef{result: idx, first: -1, topic: m.Topic, uniq: sp.uniq, pseq: sp.pseq})
		return true
	}
	return false
}

// dupRef is a duplicate in an entry: results[result] repeats
// results[first] of the same entry, or (first -1) a message stored before,
// found again by its UNIQ_KEY and PSEQ.
type dupRef struct {
	result, first int
	topic         string
	uniq, pseq    []byte // alias the entry's message
}

// fillDuplicates answers each duplicate of an entry with its first copy's
// result: from this entry's results, or read back from the commitlog
// through the index (by UNIQ_KEY, in its topic or, delayed, in the
// schedule topic). A first copy that cannot be found (no UNIQ_KEY, or
// retention removed it) leaves the result without a position
// (QueueOffset -1); it is still a success: the message was stored.
func (s *Store) fillDuplicates(results []PutResult) {
	for _, d := range s.scratch.dups {
		r := &results[d.result]
		if d.first >= 0 {
			*r = results[d.first]
			r.Duplicate = true
			continue
		}
		r.QueueOffset, r.PhysicalOffset = -1, -1
		m, ok := s.firstCopy(d)
		if !ok {
			continue
		}
		r.Topic, r.QueueID, r.QueueOffset, r.PhysicalOffset, r.Size, r.StoreTimestamp =
			m.Topic, m.QueueID, m.QueueOffset, m.PhysicalOffset, m.Size, m.StoreTimestamp
		r.OffsetMsgID = string(message.AppendOffsetMsgID(nil, m.StoreHost, m.PhysicalOffset))
		r.MsgID = string(d.uniq)
	}
	s.counters.dedupHits.Add(uint64(len(s.scratch.dups)))
}

// firstCopy finds the stored message a duplicate repeats.
func (s *Store) firstCopy(d dupRef) (Message, bool) {
	if len(d.uniq) == 0 {
		return Message{}, false
	}
	for _, topic := range []string{d.topic, ScheduleTopic} {
		found, err := s.queryIndex(topic, string(d.uniq), 1, 0, 1<<62, func(m *Message) bool {
			v, _ := m.Property(message.PropertyProducerSeq)
			return v == string(d.pseq)
		})
		if err == nil && len(found) > 0 {
			return found[0], true
		}
	}
	return Message{}, false
}

// SetDedupConfig applies a SetDedup entry: the producer table's settings
// (window, producer expiry), replicated like a topic change. Settings out
// of bounds are ErrBadCommand.
func (s *Store) SetDedupConfig(h EntryHeader, cfg meta.DedupConfig) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrBadCommand, err)
	}
	return s.command(h, (&meta.Command{Type: meta.SetDedup, Dedup: cfg}).Frame(), func() error { return nil })
}

// DedupConfig returns the producer table's settings in force.
func (s *Store) DedupConfig() meta.DedupConfig {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.meta.Producers.Config
}
