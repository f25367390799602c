package store

import (
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/consumequeue"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/meta"
)

// ValidateMessage checks a message against the store's limits before it is
// proposed; the leader calls it so bad input never reaches the Raft log.
func (s *Store) ValidateMessage(m *message.Message) error {
	if err := s.checkMessage(m); err != nil {
		return err
	}
	if err := checkClientTimer(m); err != nil {
		return err
	}
	s.mu.RLock()
	t, ok := s.meta.Topics[m.Topic]
	s.mu.RUnlock()
	return s.checkQueue(m, t, ok)
}

// checkMessage is every check that needs no store state: sizes, topic name,
// properties and queue id bounds.
func (s *Store) checkMessage(m *message.Message) error {
	if len(m.Body) > s.cfg.MaxMessageSize {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrMessageTooLarge, len(m.Body), s.cfg.MaxMessageSize)
	}
	if len(m.Properties) > message.MaxPropertiesLen {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrPropsTooLarge, len(m.Properties), message.MaxPropertiesLen)
	}
	if size := int64(message.MessageSize(m)) + message.FrameSize; size > s.maxEntrySize() {
		return fmt.Errorf("%w: record of %d bytes does not fit a %d-byte segment", ErrMessageTooLarge, size, s.cfg.CommitLogFileSize)
	}
	if err := ValidateTopicName(m.Topic); err != nil {
		return err
	}
	if err := message.ValidateMessage(m, s.cfg.MaxMessageSize); err != nil {
		if errors.Is(err, message.ErrBadTopic) {
			return fmt.Errorf("%w: %w", ErrBadTopic, err)
		}
		return fmt.Errorf("%w: %w", ErrBadMessage, err)
	}
	if m.QueueID < 0 || m.QueueID >= s.cfg.MaxQueues {
		return fmt.Errorf("%w: queue %d", ErrBadQueue, m.QueueID)
	}
	return nil
}

// ValidateTopicName applies message.ValidateTopic (RocketMQ's rule),
// reporting a bad name as ErrBadTopic.
func ValidateTopicName(name string) error {
	if err := message.ValidateTopic(name); err != nil {
		return fmt.Errorf("%w: %w", ErrBadTopic, err)
	}
	return nil
}

func (s *Store) checkQueue(m *message.Message, t TopicConfig, exists bool) error {
	switch {
	case !exists && !s.cfg.AutoCreateTopics:
		return fmt.Errorf("%w: %q", ErrNoSuchTopic, m.Topic)
	case !exists && m.QueueID >= s.cfg.DefaultQueues:
		return fmt.Errorf("%w: queue %d of new topic %q (it gets %d queues)", ErrBadQueue, m.QueueID, m.Topic, s.cfg.DefaultQueues)
	case exists && m.QueueID >= t.Queues:
		return fmt.Errorf("%w: queue %d of topic %q (it has %d)", ErrBadQueue, m.QueueID, m.Topic, t.Queues)
	}
	return nil
}

// admitNewTopic counts a topic this entry auto-creates against
// MaxTotalQueues: the topics it already created, then DefaultQueues more.
// A topic that exists, or that an earlier message of the entry created,
// passes. Deterministic: it reads only meta and the entry.
func (a *appendScratch) admitNewTopic(s *Store, topic string) error {
	if _, ok := s.meta.Topics[topic]; ok || slices.Contains(a.newTopics, topic) {
		return nil
	}
	if a.totalQueues < 0 {
		a.totalQueues = s.meta.TotalQueues()
	}
	if a.totalQueues+int(s.cfg.DefaultQueues) > s.cfg.MaxTotalQueues {
		return fmt.Errorf("%w (%d): auto-creating %q with %d queues", ErrQueueLimit, s.cfg.MaxTotalQueues, topic, s.cfg.DefaultQueues)
	}
	a.totalQueues += int(s.cfg.DefaultQueues)
	a.newTopics = append(a.newTopics, topic)
	return nil
}

// appendScratch is AppendMessages' reusable working memory (writeMu).
type appendScratch struct {
	newTopics    []string // topics this entry auto-creates
	totalQueues  int      // queues of all topics with newTopics; -1 until needed
	accepted     []message.Message
	queueOffsets []int64
	pos          []commitlog.RecordPos
	next         map[meta.QueueKey]int64
	touched      []meta.QueueKey
	props        []storeProps // per accepted message
	// entrySeqs maps the PSEQ of each accepted message to its result, so
	// a second copy in the same entry is its duplicate.
	entrySeqs map[string]int
	// dups are the results that repeat another (dedup.go).
	dups []dupRef
	// scheduled holds the messages of this entry the store rewrote: the
	// ScheduleTopic copies of delayed messages, messages without a
	// TIMER_DELIVERED a client sent along.
	scheduled []message.Message
	queues    []queueRef // consume queues used by this entry
}

// queueRef caches one consume-queue lookup for the rest of an entry.
type queueRef struct {
	k meta.QueueKey
	q *consumequeue.Queue
}

// storeProps are the property values the store reads, aliasing the message.
type storeProps struct {
	tags, keys, uniq, pseq []byte
	timer, delivered       []byte // a delay property; TIMER_DELIVERED
	timerKey               string
	due                    int64 // a scheduled record's due time: its tagsCode (0: none)
}

// readStoreProps reads TAGS, KEYS, UNIQ_KEY, PSEQ and the timer properties
// (message.ReadStoreProperties).
func readStoreProps(props []byte) storeProps {
	sp := message.ReadStoreProperties(props)
	return storeProps{tags: sp.Tags, keys: sp.Keys, uniq: sp.Uniq, pseq: sp.ProducerSeq,
		timer: sp.Timer, timerKey: sp.TimerKey, delivered: sp.Delivered}
}

// queue returns the consume queue of k, creating it if needed, looking it
// up in the store once per entry.
func (a *appendScratch) queue(s *Store, k meta.QueueKey) (*consumequeue.Queue, error) {
	for i := range a.queues {
		if a.queues[i].k == k {
			return a.queues[i].q, nil
		}
	}
	q, err := s.cqs.GetOrCreate(k.Topic, k.Queue)
	if err != nil {
		return nil, err
	}
	a.queues = append(a.queues, queueRef{k, q})
	return q, nil
}

// reset empties the scratch without keeping references to the caller's
// messages alive.
func (a *appendScratch) reset() {
	clear(a.accepted)
	a.accepted, a.queueOffsets, a.pos = a.accepted[:0], a.queueOffsets[:0], a.pos[:0]
	clear(a.touched)
	a.touched = a.touched[:0]
	clear(a.props)
	a.props = a.props[:0]
	clear(a.queues)
	a.queues = a.queues[:0]
	if a.entrySeqs == nil {
		a.entrySeqs = map[string]int{}
	}
	clear(a.entrySeqs)
	clear(a.dups)
	a.dups = a.dups[:0]
	clear(a.scheduled)
	a.scheduled = a.scheduled[:0]
	clear(a.newTopics)
	a.newTopics, a.totalQueues = a.newTopics[:0], -1
	if a.next == nil {
		a.next = make(map[meta.QueueKey]int64)
	}
	clear(a.next)
}

// AppendMessages writes one Raft entry's messages as one commitlog entry and
// dispatches them. results gets one PutResult per message; a message that
// fails validation gets Err and is not written (the rest are). An entry with
// no valid message still leaves a no-op frame, so appliedIndex advances.
// On a local error results is empty when the entry was not written, and
// describes the written entry when only its dispatch to the consume queues
// and index failed (recovery from disk redoes the dispatch).
func (s *Store) AppendMessages(h EntryHeader, msgs []message.Message, results []PutResult) ([]PutResult, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := s.checkWritable(h); err != nil {
		return results, err
	}
	return s.appendLocked(h, msgs, results, false)
}

// appendLocked is AppendMessages with writeMu held. delivery marks the
// copies DeliverDue stores in their real topics: they skip the client
// checks (reserved properties, scheduling) and go to their queue whatever
// the topic became meanwhile (deliveryQueue).
func (s *Store) appendLocked(h EntryHeader, msgs []message.Message, results []PutResult, delivery bool) ([]PutResult, error) {
	a := &s.scratch
	a.reset()
	defer a.reset()
	results = results[:0]
	entrySize := int64(message.FrameSize)
	for i := range msgs {
		m := &msgs[i]
		res := PutResult{Topic: m.Topic, QueueID: m.QueueID, StoreTimestamp: h.StoreTimestamp}
		sp := readStoreProps(m.Properties)
		if delivery {
			s.deliveryQueue(m)
			res.QueueID = m.QueueID
			res.Err = s.checkMessage(m)
		} else {
			res.Err = s.validateForApply(m)
			if res.Err == nil {
				res.Err = checkReserved(m, &sp)
			}
			if res.Err == nil && sp.delivered != nil {
				m, sp = a.withoutDeliveredMark(m)
			}
		}
		if res.Err == nil && sp.pseq != nil && a.dedup(s, &res, len(results), m, &sp, h.StoreTimestamp) {
			results = append(results, res)
			continue
		}
		if res.Err == nil && !delivery && sp.timer != nil {
			m, res.Err = a.schedule(s, m, &sp, h.StoreTimestamp)
			res.Topic, res.QueueID = m.Topic, m.QueueID
		}
		if res.Err == nil && m.Topic != ScheduleTopic {
			res.Err = a.admitNewTopic(s, m.Topic)
		}
		if res.Err == nil && entrySize+int64(message.MessageSize(m)) > s.maxEntrySize() {
			res.Err = fmt.Errorf("%w: the entry would exceed a commitlog segment", ErrMessageTooLarge)
		}
		if res.Err == nil {
			a.props = append(a.props, sp)
			if sp.pseq != nil {
				a.entrySeqs[string(sp.pseq)] = len(results)
			}
			entrySize += int64(message.MessageSize(m))
			k := meta.QueueKey{Topic: m.Topic, Queue: m.QueueID}
			off, ok := a.next[k]
			if !ok {
				off = s.queueOffset(k)
			}
			a.next[k] = off + 1
			res.QueueOffset = off
			a.accepted = append(a.accepted, *m)
			a.queueOffsets = append(a.queueOffsets, off)
		}
		results = append(results, res)
	}
	kind := message.KindMessages
	if len(a.accepted) == 0 {
		kind = message.KindNoop
	}
	start, pos, err := s.log.AppendEntry(s.frame(h, kind), nil, a.accepted, a.queueOffsets, a.pos)
	a.pos = pos
	if err != nil {
		return results[:0], s.failClosed(fmt.Errorf("append entry %d: %w", h.RaftIndex, err))
	}
	s.fillResults(results, a.accepted, pos, h)
	s.fillDuplicates(results)
	// Publish the new confirm offset before the consume-queue units that
	// point below it, so a reader never finds a unit beyond the applied log.
	s.finishEntry(h, start, s.log.WriteOffset(), uint64(len(a.accepted)))
	if err := s.dispatchAppended(a.accepted, a.queueOffsets, pos, h.StoreTimestamp); err != nil {
		return results, s.failClosed(fmt.Errorf("dispatch entry %d: %w", h.RaftIndex, err))
	}
	return results, nil
}

// maxEntrySize is the largest entry a segment takes (it ends with a blank).
func (s *Store) maxEntrySize() int64 {
	return s.cfg.CommitLogFileSize - message.BlankSize
}

// validateForApply is ValidateMessage without the topic lock (writeMu held).
func (s *Store) validateForApply(m *message.Message) error {
	if err := s.checkMessage(m); err != nil {
		return err
	}
	t, ok := s.meta.Topics[m.Topic]
	return s.checkQueue(m, t, ok)
}

func (s *Store) checkWritable(h EntryHeader) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if err := s.failed(); err != nil {
		return err
	}
	if h.RaftIndex <= s.applied.RaftIndex {
		return fmt.Errorf("%w: %d <= %d", ErrAlreadyApplied, h.RaftIndex, s.applied.RaftIndex)
	}
	return nil
}

func (s *Store) frame(h EntryHeader, kind message.Kind) commitlog.EntryHeader {
	return commitlog.EntryHeader{Kind: kind, RaftIndex: h.RaftIndex, Term: h.Term, StoreTimestamp: h.StoreTimestamp, StoreHost: h.StoreHost}
}

func (s *Store) queueOffset(k meta.QueueKey) int64 {
	return s.meta.Queues[k]
}

// fillResults fills in the accepted messages' results. The message ids of
// one entry share two allocations (one for the offset ids, one for the
// UNIQ_KEYs) instead of two strings per message.
func (s *Store) fillResults(results []PutResult, accepted []message.Message, pos []commitlog.RecordPos, h EntryHeader) {
	a := &s.scratch
	uniqLen := 0
	for i := range accepted {
		uniqLen += len(a.props[i].uniq)
	}
	ids := make([]byte, 0, len(accepted)*message.OffsetMsgIDLen)
	uniqs := make([]byte, 0, uniqLen)
	j := 0
	for i := range results {
		r := &results[i]
		if r.Err != nil || r.Duplicate {
			continue
		}
		p := pos[j]
		r.PhysicalOffset, r.Size = p.Offset, p.Size
		n := len(ids)
		ids = message.AppendOffsetMsgID(ids, h.StoreHost, p.Offset)
		r.OffsetMsgID = unsafe.String(&ids[n], message.OffsetMsgIDLen)
		r.MsgID = r.OffsetMsgID
		if uniq := a.props[j].uniq; len(uniq) > 0 {
			n := len(uniqs)
			uniqs = append(uniqs, uniq...)
			r.MsgID = unsafe.String(&uniqs[n], len(uniq))
		}
		j++
	}
}

// dispatchAppended builds consume queue units and index keys for the records
// just written, and advances the queue table.
func (s *Store) dispatchAppended(msgs []message.Message, queueOffsets []int64, pos []commitlog.RecordPos, storeTs int64) error {
	a := &s.scratch
	s.mu.Lock()
	for i := range msgs {
		m := &msgs[i]
		k := meta.QueueKey{Topic: m.Topic, Queue: m.QueueID}
		if _, ok := s.meta.Topics[m.Topic]; !ok {
			s.meta.Topics[m.Topic] = TopicConfig{Name: m.Topic, Queues: s.newTopicQueues(m.Topic), Perm: 6}
		}
		s.meta.Queues[k] = queueOffsets[i] + 1
		if pseq := a.props[i].pseq; pseq != nil {
			producer, seq, _ := message.ParseProducerSeq(pseq) // validated
			s.meta.Producers.Store(producer, seq, storeTs)
		}
		if !slices.Contains(a.touched, k) {
			a.touched = append(a.touched, k)
		}
	}
	timerChanged, newDue := false, int64(0)
	for i := range msgs {
		if due := a.props[i].due; due != 0 {
			timerChanged = true
			if newDue == 0 || due < newDue {
				newDue = due
			}
		} else if mark := a.props[i].delivered; mark != nil {
			s.advanceTimer(mark, storeTs)
			timerChanged = true
		}
	}
	s.mu.Unlock()
	if timerChanged {
		s.scheduleChanged(newDue)
	}
	var bodies uint64
	for i := range msgs {
		m := &msgs[i]
		if err := s.dispatchOne(m.Topic, m.QueueID, queueOffsets[i], pos[i], a.props[i], storeTs); err != nil {
			return err
		}
		bodies += uint64(len(m.Body))
	}
	s.counters.bytes.Add(bodies)
	for _, k := range a.touched {
		s.notify.wake(k)
	}
	return nil
}

// dispatchOne puts one record into its consume queue and the index, without
// allocating.
func (s *Store) dispatchOne(topic string, queueID int32, queueOffset int64, pos commitlog.RecordPos, sp storeProps, storeTs int64) error {
	q, err := s.scratch.queue(s, meta.QueueKey{Topic: topic, Queue: queueID})
	if err != nil {
		return fmt.Errorf("store: consume queue %s/%d: %w", topic, queueID, err)
	}
	tagsCode := message.TagsCodeBytes(sp.tags)
	if sp.due != 0 {
		tagsCode = sp.due
	}
	unit := consumequeue.Unit{PhyOffset: pos.Offset, Size: pos.Size, TagsCode: tagsCode}
	if err := q.Put(queueOffset, unit); err != nil {
		return fmt.Errorf("store: consume queue %s/%d offset %d: %w", topic, queueID, queueOffset, err)
	}
	if len(sp.keys) == 0 && len(sp.uniq) == 0 {
		return nil
	}
	return s.idx.PutMessageKeys(unsafe.Slice(unsafe.StringData(topic), len(topic)), sp.keys, sp.uniq, pos.Offset, storeTs)
}

// splitKeys splits a KEYS value at spaces, dropping empty keys.
func splitKeys(keys string) []string {
	var out []string
	start := -1
	for i := 0; i <= len(keys); i++ {
		if i == len(keys) || keys[i] == ' ' {
			if start >= 0 {
				out = append(out, keys[start:i])
				start = -1
			}
		} else if start < 0 {
			start = i
		}
	}
	return out
}

func (s *Store) finishEntry(h EntryHeader, start, end int64, messages uint64) {
	s.mu.Lock()
	s.applied = entryMark{Offset: start, End: end, RaftIndex: h.RaftIndex, Term: h.Term, StoreTimestamp: h.StoreTimestamp}
	s.mu.Unlock()
	s.counters.entries.Add(1)
	s.counters.messages.Add(messages)
}

// CreateTopic creates a topic. ErrTopicExists, ErrBadTopic and ErrBadQueue
// are deterministic: nothing is written (the FSM then calls MarkApplied).
func (s *Store) CreateTopic(h EntryHeader, t TopicConfig) error {
	if err := ValidateTopicName(t.Name); err != nil {
		return err
	}
	if err := notSchedule(t.Name); err != nil {
		return err
	}
	if t.Queues <= 0 || t.Queues > s.cfg.MaxQueues {
		return fmt.Errorf("%w: %d queues (1-%d)", ErrBadQueue, t.Queues, s.cfg.MaxQueues)
	}
	if t.Perm == 0 {
		t.Perm = 6
	}
	return s.command(h, (&meta.Command{Type: meta.CreateTopic, Topic: t}).Frame(), func() error {
		if _, ok := s.meta.Topics[t.Name]; ok {
			return fmt.Errorf("%w: %q", ErrTopicExists, t.Name)
		}
		if total := s.meta.TotalQueues(); total+int(t.Queues) > s.cfg.MaxTotalQueues {
			return fmt.Errorf("%w (%d): %d queues exist, %q asks for %d", ErrQueueLimit, s.cfg.MaxTotalQueues, total, t.Name, t.Queues)
		}
		return nil
	})
}

// DeleteTopic removes a topic, its consume queues and its consumer offsets.
// Its messages stay in the commitlog until retention removes them.
func (s *Store) DeleteTopic(h EntryHeader, name string) error {
	if err := notSchedule(name); err != nil {
		return err
	}
	err := s.command(h, (&meta.Command{Type: meta.DeleteTopic, Topic: meta.TopicConfig{Name: name}}).Frame(), func() error {
		if _, ok := s.meta.Topics[name]; !ok {
			return fmt.Errorf("%w: %q", ErrNoSuchTopic, name)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return s.cqs.DeleteTopic(name)
}

// CommitOffsets stores consumer-group offsets.
func (s *Store) CommitOffsets(h EntryHeader, commits []OffsetCommit) error {
	return s.command(h, (&meta.Command{Type: meta.CommitOffsets, Commits: commits}).Frame(), func() error {
		for _, c := range commits {
			t, ok := s.meta.Topics[c.Topic]
			switch {
			case c.Group == "" || len(c.Group) > 255:
				return fmt.Errorf("%w: group %q", ErrBadCommand, c.Group)
			case !ok:
				return fmt.Errorf("%w: %q", ErrNoSuchTopic, c.Topic)
			case c.QueueID < 0 || c.QueueID >= t.Queues:
				return fmt.Errorf("%w: queue %d of %q", ErrBadQueue, c.QueueID, c.Topic)
			case c.Offset < 0:
				return fmt.Errorf("%w: %d", ErrBadOffset, c.Offset)
			}
		}
		return nil
	})
}

// SetMember records the client API address of a Raft server in the
// store's meta (Members), so a restarted node has it without a replay of
// the Raft log. The last address recorded for an id wins.
func (s *Store) SetMember(h EntryHeader, id, apiAddr string) error {
	if len(id) > meta.MaxStringBytes || len(apiAddr) > meta.MaxStringBytes {
		return fmt.Errorf("%w: member id or address longer than %d bytes", ErrBadCommand, meta.MaxStringBytes)
	}
	return s.command(h, (&meta.Command{Type: meta.SetMember, MemberID: id, MemberAPIAddr: apiAddr}).Frame(), func() error { return nil })
}

// MarkApplied records an entry that changes no state (no-op, rejected
// command) so appliedIndex still advances durably.
func (s *Store) MarkApplied(h EntryHeader) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := s.checkWritable(h); err != nil {
		return err
	}
	return s.appendFrame(h, message.KindNoop, nil)
}

// command validates (under writeMu), writes a command frame and applies it
// to meta exactly as recovery will replay it.
func (s *Store) command(h EntryHeader, payload []byte, check func() error) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := s.checkWritable(h); err != nil {
		return err
	}
	if err := check(); err != nil {
		return err
	}
	if err := s.appendFrame(h, message.KindCommand, payload); err != nil {
		return err
	}
	s.mu.Lock()
	err := s.meta.Apply(payload)
	s.mu.Unlock()
	if err != nil {
		return s.failClosed(fmt.Errorf("apply command of entry %d: %w", h.RaftIndex, err))
	}
	return nil
}

func (s *Store) appendFrame(h EntryHeader, kind message.Kind, payload []byte) error {
	start, _, err := s.log.AppendEntry(s.frame(h, kind), payload, nil, nil, nil)
	if err != nil {
		return s.failClosed(fmt.Errorf("append entry %d: %w", h.RaftIndex, err))
	}
	s.finishEntry(h, start, s.log.WriteOffset(), 0)
	return nil
}
