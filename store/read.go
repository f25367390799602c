package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"
	"sync"

	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/consumequeue"
	"github.com/raftmq/raftmq/index"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/meta"
)

// Read limits, as RocketMQ's getMessage.
const (
	maxPullMessages = 1024
	maxPullBytes    = 128 << 20
	maxQueryResults = 64
)

// GetMessages reads up to maxNum messages (and about maxBytes) of one queue
// from offset, keeping those whose TAGS match tag ("" or "*" for all,
// "a||b" for either). The status and offsets follow RocketMQ. Every record
// is checked before it is served (FORMAT.md §2.3) and copied out of the
// mapping (one allocation per call holds all bodies and properties).
func (s *Store) GetMessages(topic string, queueID int32, offset int64, maxNum, maxBytes int, tag string) (GetResult, error) {
	return s.getMessages(topic, queueID, offset, maxNum, maxBytes, tag, nil)
}

// ReadMessages is GetMessages without copies: fn is called, in queue order,
// with each message GetMessages would return, as a record decoded in place
// (checked like GetMessages'). The record and every slice in it alias the
// commitlog mapping and are valid only until fn returns: retention may
// unmap the segment afterwards, so copy what you keep. fn runs with the
// store's segment read lock held, so it must not call the store (a waiting
// retention or Close would deadlock with it) and should be quick. An error
// from fn ends the read and is returned as is.
// The result carries status and offsets as GetMessages', Messages is nil,
// and NextOffset follows the last message handed to fn.
func (s *Store) ReadMessages(topic string, queueID int32, offset int64, maxNum, maxBytes int, tag string, fn func(*message.Record) error) (GetResult, error) {
	if fn == nil {
		return GetResult{}, errors.New("store: ReadMessages without a callback")
	}
	return s.getMessages(topic, queueID, offset, maxNum, maxBytes, tag, fn)
}

func (s *Store) getMessages(topic string, queueID int32, offset int64, maxNum, maxBytes int, tag string, fn func(*message.Record) error) (GetResult, error) {
	if s.closed.Load() {
		return GetResult{}, ErrClosed
	}
	if maxNum <= 0 || maxNum > maxPullMessages {
		maxNum = maxPullMessages
	}
	if maxBytes <= 0 || maxBytes > maxPullBytes {
		maxBytes = maxPullBytes
	}
	q, res, ok := s.queueForRead(topic, queueID)
	if !ok {
		return res, nil
	}
	res.MinOffset, res.MaxOffset = q.MinOffset(), q.MaxOffset()
	switch {
	case res.MaxOffset == 0:
		res.Status, res.NextOffset = NoMessageInQueue, 0
		return res, nil
	case offset < res.MinOffset:
		res.Status, res.NextOffset = OffsetTooSmall, res.MinOffset
		return res, nil
	case offset == res.MaxOffset:
		res.Status, res.NextOffset = OffsetOverflowOne, offset
		return res, nil
	case offset > res.MaxOffset:
		res.Status, res.NextOffset = OffsetOverflowBadly, res.MaxOffset
		return res, nil
	}
	return s.readQueue(q, res, offset, maxNum, maxBytes, newTagFilter(tag), fn)
}

// queueForRead finds the consume queue; ok=false means res is the answer.
func (s *Store) queueForRead(topic string, queueID int32) (*consumequeue.Queue, GetResult, bool) {
	s.mu.RLock()
	t, exists := s.meta.Topics[topic]
	s.mu.RUnlock()
	if !exists || queueID < 0 || queueID >= t.Queues {
		return nil, GetResult{Status: NoMatchedLogicQueue}, false
	}
	q := s.cqs.Get(topic, queueID)
	if q == nil {
		return nil, GetResult{Status: NoMessageInQueue}, false
	}
	return q, GetResult{}, true
}

// unitBufs recycles the consume-queue unit windows of readQueue.
var unitBufs = sync.Pool{New: func() any { return new([]consumequeue.Unit) }}

// readQueue serves units from offset: to fn if set, else copied into
// res.Messages.
func (s *Store) readQueue(q *consumequeue.Queue, res GetResult, offset int64, maxNum, maxBytes int, filter tagFilter, fn func(*message.Record) error) (GetResult, error) {
	// Hold the segments (and the queue files: Close unmaps them under the
	// same lock) for the whole read, and look at closed again under it: a
	// Close that ran since getMessages' check would otherwise make every
	// record look removed by retention, and the consumer would skip them.
	s.segMu.RLock()
	defer s.segMu.RUnlock()
	if s.closed.Load() {
		return res, ErrClosed
	}
	window := min(maxNum*4, maxPullMessages)
	ubuf := unitBufs.Get().(*[]consumequeue.Unit)
	defer unitBufs.Put(ubuf)
	units, err := q.Range(offset, window, (*ubuf)[:0])
	*ubuf = units
	if err != nil {
		return res, err
	}
	// One allocation holds every body and properties block of the answer:
	// at most the units' record sizes, up to maxNum units or maxBytes.
	var arena []byte
	if fn == nil {
		var arenaSize int
		for i, u := range units {
			if i >= maxNum || (i > 0 && arenaSize+int(u.Size) > maxBytes) {
				break
			}
			if !u.Valid() || int64(u.Size) > message.MaxRecordSize {
				break // a damaged unit: the loop below reports it
			}
			arenaSize += int(u.Size)
		}
		arena = make([]byte, 0, arenaSize)
		res.Messages = make([]Message, 0, min(len(units), maxNum))
	}
	topic, queueID := q.Topic(), q.QueueID()
	key := meta.QueueKey{Topic: topic, Queue: queueID}
	checkedTo, dispatched := s.units.window(key, offset)
	confirm := s.ConfirmOffset()
	next, bytes, found := offset, 0, 0
	// One record variable for the whole call: fn(&r) makes it escape, and
	// a variable per iteration would be an allocation per message.
	var r message.Record
	for i, u := range units {
		if found >= maxNum || (found > 0 && bytes+int(u.Size) > maxBytes) {
			break
		}
		qoff := offset + int64(i)
		trusted := qoff < checkedTo || qoff >= dispatched
		if trusted && !filter.matchCode(u.TagsCode) {
			next++
			continue
		}
		if !u.Valid() { // not a unit retention removed: a damaged one
			return res, s.corrupted(fmt.Errorf("store: %s/%d offset %d: unit at %d of %d bytes: %w",
				topic, queueID, qoff, u.PhyOffset, u.Size, consumequeue.ErrCorrupt))
		}
		if u.PhyOffset >= confirm {
			return res, fmt.Errorf("%w: %d is beyond the applied log", ErrBadOffset, u.PhyOffset)
		}
		ref := commitlog.RecordRef{Offset: u.PhyOffset, Size: u.Size, Topic: topic, QueueID: queueID, QueueOffset: qoff}
		r, err = s.log.ReadRecordRef(ref)
		if errors.Is(err, commitlog.ErrOutOfRange) && u.PhyOffset < s.log.MinOffset() {
			next++
			continue // removed by retention meanwhile
		}
		if err != nil {
			return res, s.corrupted(fmt.Errorf("store: %s/%d offset %d: %w", topic, queueID, qoff, err))
		}
		tags, _ := message.GetProperty(r.Properties, message.PropertyTags)
		if code := message.TagsCodeBytes(tags); code != u.TagsCode {
			return res, s.corrupted(fmt.Errorf("store: %s/%d offset %d: unit tagsCode %d, the record's TAGS %q give %d: %w",
				topic, queueID, qoff, u.TagsCode, tags, code, consumequeue.ErrCorrupt))
		}
		next++
		if !filter.matchCode(u.TagsCode) || !filter.matchTagBytes(tags) {
			continue
		}
		bytes += int(u.Size)
		found++
		if fn != nil {
			if err := fn(&r); err != nil {
				return res, err
			}
			continue
		}
		var m Message
		arena = copyRecord(&m, &r, topic, arena)
		res.Messages = append(res.Messages, m)
	}
	s.units.checked(key, offset, next)
	res.NextOffset = next
	res.Status = Found
	if found == 0 {
		res.Status = NoMatchedMessage
	}
	return res, nil
}

// readMessage copies the record at phy out of the mapping (segMu held).
func (s *Store) readMessage(phy int64) (Message, error) {
	if phy >= s.ConfirmOffset() {
		return Message{}, fmt.Errorf("%w: %d", ErrNotApplied, phy)
	}
	r, err := s.log.ReadRecord(phy)
	if err != nil {
		return Message{}, err // not counted: a lookup's offset may come from a client
	}
	var m Message
	copyRecord(&m, &r, string(r.Topic), make([]byte, 0, len(r.Body)+len(r.Properties)))
	return m, nil
}

// copyRecord fills m from r, copying body and properties to the end of
// arena (each with its own capacity limit) and returning the extended arena.
// topic must equal r.Topic (a caller that checked it passes its own string).
func copyRecord(m *Message, r *message.Record, topic string, arena []byte) []byte {
	*m = Message{
		Topic: topic, QueueID: r.QueueID, QueueOffset: r.QueueOffset, PhysicalOffset: r.PhysicalOffset,
		Size: r.Size, Flag: r.Flag, SysFlag: r.SysFlag, BornTimestamp: r.BornTimestamp, BornHost: r.BornHost,
		StoreTimestamp: r.StoreTimestamp, StoreHost: r.StoreHost, ReconsumeTimes: r.ReconsumeTimes,
		PreparedTxOffset: r.PreparedTxOffset, BodyCRC: r.BodyCRC,
	}
	p := len(arena)
	arena = append(arena, r.Body...)
	m.Body = arena[p:len(arena):len(arena)]
	p = len(arena)
	arena = append(arena, r.Properties...)
	m.Properties = arena[p:len(arena):len(arena)]
	return arena
}

type tagFilter struct {
	tags  []string
	codes []int64
}

func newTagFilter(expr string) tagFilter {
	var f tagFilter
	expr = strings.TrimSpace(expr)
	if expr == "" || expr == "*" {
		return f
	}
	for _, t := range strings.Split(expr, "||") {
		if t = strings.TrimSpace(t); t != "" {
			f.tags = append(f.tags, t)
			f.codes = append(f.codes, message.TagsCode(t))
		}
	}
	return f
}

func (f tagFilter) matchCode(code int64) bool {
	if len(f.codes) == 0 {
		return true
	}
	for _, c := range f.codes {
		if c == code {
			return true
		}
	}
	return false
}

func (f tagFilter) matchTagBytes(tags []byte) bool {
	if len(f.tags) == 0 {
		return true
	}
	for _, t := range f.tags {
		if t == string(tags) {
			return true
		}
	}
	return false
}

// WaitMessage blocks until the queue's max offset exceeds offset, the store
// closes, or ctx ends.
func (s *Store) WaitMessage(ctx context.Context, topic string, queueID int32, offset int64) error {
	k := meta.QueueKey{Topic: topic, Queue: queueID}
	for {
		ch := s.notify.channel(k)
		if s.closed.Load() {
			return ErrClosed
		}
		if max, err := s.MaxOffset(topic, queueID); err == nil && max > offset {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// MinOffset of a queue (ErrNoSuchTopic / ErrBadQueue for unknown queues).
func (s *Store) MinOffset(topic string, queueID int32) (int64, error) {
	q, err := s.queue(topic, queueID)
	if q == nil || err != nil {
		return 0, err
	}
	return q.MinOffset(), nil
}

// MaxOffset of a queue: the next queue offset to be written.
func (s *Store) MaxOffset(topic string, queueID int32) (int64, error) {
	q, err := s.queue(topic, queueID)
	if q == nil || err != nil {
		return 0, err
	}
	return q.MaxOffset(), nil
}

func (s *Store) queue(topic string, queueID int32) (*consumequeue.Queue, error) {
	s.mu.RLock()
	t, ok := s.meta.Topics[topic]
	s.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNoSuchTopic, topic)
	}
	if queueID < 0 || queueID >= t.Queues {
		return nil, fmt.Errorf("%w: queue %d of %q (it has %d)", ErrBadQueue, queueID, topic, t.Queues)
	}
	return s.cqs.Get(topic, queueID), nil
}

// OffsetByTime: upper=false is RocketMQ's LOWER boundary, true UPPER.
func (s *Store) OffsetByTime(topic string, queueID int32, ts int64, upper bool) (int64, error) {
	q, err := s.queue(topic, queueID)
	if q == nil || err != nil {
		return 0, err
	}
	return q.OffsetByTime(ts, upper, func(phy int64) (int64, error) {
		s.segMu.RLock()
		defer s.segMu.RUnlock()
		return s.log.StoreTimestampAt(phy)
	})
}

// LookupByOffset reads the message at a physical offset.
func (s *Store) LookupByOffset(phy int64) (Message, error) {
	if phy < 0 {
		return Message{}, fmt.Errorf("%w: %d", ErrBadOffset, phy)
	}
	s.segMu.RLock()
	defer s.segMu.RUnlock()
	m, err := s.readMessage(phy)
	if err != nil {
		return Message{}, fmt.Errorf("%w: no message at offset %d: %w", ErrNotFound, phy, err)
	}
	return m, nil
}

// LookupByMsgID finds a message by its offset msg id (32 hex characters) or
// by its UNIQ_KEY through the index.
func (s *Store) LookupByMsgID(topic, msgID string) ([]Message, error) {
	if _, phy, err := message.ParseOffsetMsgID(msgID); err == nil {
		if m, err := s.LookupByOffset(phy); err == nil && (topic == "" || m.Topic == topic) {
			return []Message{m}, nil
		}
	}
	if topic == "" {
		return nil, fmt.Errorf("%w: a topic is needed to look up %q by UNIQ_KEY", ErrBadTopic, msgID)
	}
	return s.queryIndex(topic, msgID, maxQueryResults, 0, 1<<62, func(m *Message) bool {
		v, _ := m.Property(message.PropertyUniqKey)
		return v == msgID
	})
}

// QueryByKey finds messages of topic whose KEYS or UNIQ_KEY hold key and
// whose store time is in [begin, end], newest first.
func (s *Store) QueryByKey(topic, key string, max int, begin, end int64) ([]Message, error) {
	if err := ValidateTopicName(topic); err != nil {
		return nil, err
	}
	if key == "" {
		return nil, fmt.Errorf("%w: empty key", ErrNotFound)
	}
	return s.queryIndex(topic, key, max, begin, end, func(m *Message) bool {
		keys, _ := m.Property(message.PropertyKeys)
		uniq, _ := m.Property(message.PropertyUniqKey)
		for _, k := range splitKeys(keys) {
			if k == key {
				return true
			}
		}
		return uniq == key
	})
}

func (s *Store) queryIndex(topic, key string, max int, begin, end int64, match func(*Message) bool) ([]Message, error) {
	if max <= 0 || max > maxQueryResults {
		max = maxQueryResults
	}
	offsets, err := s.idx.Query(topic, key, max*4, begin, end)
	if err != nil {
		return nil, s.corrupted(err)
	}
	hash := index.KeyHash(index.BuildKey(topic, key))
	var out []Message
	s.segMu.RLock()
	defer s.segMu.RUnlock()
	for _, phy := range offsets {
		m, err := s.readMessage(phy)
		switch {
		case errors.Is(err, message.ErrCorrupt):
			return nil, s.corrupted(fmt.Errorf("store: key %q of %s: %w", key, topic, err))
		case err != nil:
			continue // below the commitlog's min offset (retention)
		case !indexedUnder(&m, hash):
			return nil, s.corrupted(fmt.Errorf("store: key %q of %s: the index entry points at %d, a record without the key's hash: %w",
				key, topic, phy, index.ErrCorrupt))
		}
		if m.Topic != topic || !match(&m) || m.StoreTimestamp < begin || m.StoreTimestamp > end {
			continue
		}
		out = append(out, m)
		if len(out) == max {
			break
		}
	}
	return out, nil
}

// Topics lists topic configurations sorted by name.
func (s *Store) Topics() []TopicConfig {
	s.mu.RLock()
	out := make([]TopicConfig, 0, len(s.meta.Topics))
	for _, t := range s.meta.Topics {
		out = append(out, t)
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Members returns a copy of the Raft server id → client API address map
// (SetMember).
func (s *Store) Members() map[string]string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return maps.Clone(s.meta.Members)
}

// Topic returns one topic's configuration.
func (s *Store) Topic(name string) (TopicConfig, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, ok := s.meta.Topics[name]
	return t, ok
}

// ConsumerOffset is the offset a group committed for a queue.
func (s *Store) ConsumerOffset(group, topic string, queueID int32) (int64, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	off, ok := s.meta.Offsets[meta.OffsetKey{Group: group, QueueKey: meta.QueueKey{Topic: topic, Queue: queueID}}]
	return off, ok
}

// indexedUnder reports whether the index put m under hash: one of the key
// hashes of its UNIQ_KEY and KEYS in its own topic (a hash the query's key
// shares with another topic's key is legitimate; the caller filters).
func indexedUnder(m *Message, hash int32) bool {
	_, keys, uniq := message.IndexedProperties(m.Properties)
	var buf [8]int32
	for _, h := range index.MessageKeyHashes(buf[:0], []byte(m.Topic), keys, uniq) {
		if h == hash {
			return true
		}
	}
	return false
}
