package store

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/raftmq/raftmq/consumequeue"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/meta"
)

// Delayed delivery. A message with a delay property (message.PropertyDelayLevel,
// PropertyTimerDeliverMs, PropertyTimerDelaySec, PropertyTimerDelayMs) that
// is due after its store time, and after everything delivered so far, is
// stored in ScheduleTopic instead: in the queue of its due hour
// (meta.Bucket), with REAL_TOPIC, REAL_QID and TIMER_OUT_MS added and its
// due time as the consume-queue tagsCode. It is durable at once and
// invisible in its real topic. DeliverDue, an entry the leader proposes
// when its clock passes a due time (node/scheduler.go), stores a copy of
// every scheduled message due by the entry's store time in its real topic,
// marked TIMER_DELIVERED, and advances meta.Timer. Every step reads only
// replicated state (the commitlog, the schedule queues derived from it,
// meta), so replicas deliver alike; a message arriving already due, or due
// at or before meta.Timer.UpTo, is stored in its real topic at once.
//
// Pending scheduled records pin their commitlog segments: retention keeps
// every segment from the oldest pending one on (pendingMinPhy).

// ScheduleTopic holds scheduled messages until they are due.
const ScheduleTopic = meta.ScheduleTopic

// ScheduleHorizon is the longest delay, in ms: 40 days. It is fixed (every
// replica must refuse the same messages).
const ScheduleHorizon = meta.ScheduleHorizonMs

// deliverBatch bounds the messages of one DeliverDue entry.
const deliverBatch = 1024

// delayLevels are RocketMQ's default messageDelayLevel, in ms (level 1-18).
var delayLevels = [...]int64{1e3, 5e3, 10e3, 30e3, 60e3, 120e3, 180e3, 240e3, 300e3, 360e3, 420e3, 480e3, 540e3, 600e3,
	1200e3, 1800e3, 3600e3, 7200e3}

// ErrBadDelay is returned (wrapped, with ErrBadMessage) for a delay
// property that does not parse or lies beyond ScheduleHorizon.
var ErrBadDelay = errors.New("store: bad delay")

// checkReserved refuses messages for ScheduleTopic: only the store writes
// there.
func checkReserved(m *message.Message, _ *storeProps) error {
	if m.Topic == ScheduleTopic {
		return fmt.Errorf("%w: %q is the store's schedule topic; use a delay property instead", ErrBadTopic, m.Topic)
	}
	return nil
}

// withoutDeliveredMark returns a copy of m without TIMER_DELIVERED, which
// only the store's deliveries may carry (recovery replays it as one): a
// consumed delivered message sent on keeps its other properties.
func (a *appendScratch) withoutDeliveredMark(m *message.Message) (*message.Message, storeProps) {
	c := *m
	c.Properties = make([]byte, 0, len(m.Properties))
	for k, v := range message.Properties(m.Properties) {
		if string(k) != message.PropertyTimerDelivered {
			c.Properties = message.AppendProperty(c.Properties, string(k), string(v))
		}
	}
	a.scheduled = append(a.scheduled, c)
	p := &a.scheduled[len(a.scheduled)-1]
	return p, readStoreProps(p.Properties)
}

// notSchedule refuses admin commands on ScheduleTopic: its queues are the
// store's, one per due hour.
func notSchedule(topic string) error {
	if topic == ScheduleTopic {
		return fmt.Errorf("%w: %q is the store's schedule topic", ErrBadTopic, topic)
	}
	return nil
}

// checkClientTimer is checkReserved, a PSEQ that parses and a delay
// property that parses, for a message before it is proposed (its due time
// is checked at apply; the apply path refuses a bad PSEQ as well).
func checkClientTimer(m *message.Message) error {
	sp := readStoreProps(m.Properties)
	if err := checkReserved(m, &sp); err != nil {
		return err
	}
	if sp.pseq != nil {
		if _, _, err := message.ParseProducerSeq(sp.pseq); err != nil {
			return fmt.Errorf("%w: %w", ErrBadMessage, err)
		}
	}
	if sp.timer != nil {
		if _, err := strconv.ParseInt(string(sp.timer), 10, 64); err != nil {
			return fmt.Errorf("%w: %w: %s=%q is not an integer", ErrBadMessage, ErrBadDelay, sp.timerKey, sp.timer)
		}
	}
	return nil
}

// dueTime is the due time of a message with a delay property, stored at
// storeTs.
func dueTime(sp *storeProps, storeTs int64) (int64, error) {
	v, err := strconv.ParseInt(string(sp.timer), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %w: %s=%q is not an integer", ErrBadMessage, ErrBadDelay, sp.timerKey, sp.timer)
	}
	var due int64
	switch sp.timerKey {
	case message.PropertyDelayLevel: // RocketMQ: 0 or less is none, above 18 is 18
		if v <= 0 {
			return storeTs, nil
		}
		due = storeTs + delayLevels[min(v, int64(len(delayLevels)))-1]
	case message.PropertyTimerDeliverMs:
		due = v
	case message.PropertyTimerDelaySec:
		if v > ScheduleHorizon/1000 {
			v = ScheduleHorizon/1000 + 1
		}
		due = storeTs + v*1000
	default: // TIMER_DELAY_MS
		if v > ScheduleHorizon {
			v = ScheduleHorizon + 1
		}
		due = storeTs + v
	}
	if due-storeTs > ScheduleHorizon {
		return 0, fmt.Errorf("%w: %w: %s=%d is more than 40 days ahead", ErrBadMessage, ErrBadDelay, sp.timerKey, v)
	}
	return due, nil
}

// schedule returns the message to write for m, which carries a delay
// property: m itself when it is due already, else its copy for
// ScheduleTopic (kept in the scratch until the entry is written).
func (a *appendScratch) schedule(s *Store, m *message.Message, sp *storeProps, storeTs int64) (*message.Message, error) {
	due, err := dueTime(sp, storeTs)
	if err != nil || due <= storeTs || due <= s.meta.Timer.UpTo {
		return m, err
	}
	c := *m
	props := make([]byte, 0, len(m.Properties)+64+len(m.Topic))
	props = append(props, m.Properties...)
	props = message.AppendProperty(props, message.PropertyRealTopic, m.Topic)
	props = message.AppendProperty(props, message.PropertyRealQueueID, strconv.Itoa(int(m.QueueID)))
	props = message.AppendProperty(props, message.PropertyTimerOutMs, strconv.FormatInt(due, 10))
	if len(props) > message.MaxPropertiesLen {
		return m, fmt.Errorf("%w: %d bytes with the schedule properties, limit %d", ErrPropsTooLarge, len(props), message.MaxPropertiesLen)
	}
	c.Topic, c.QueueID, c.Properties = ScheduleTopic, meta.Bucket(due), props
	sp.due = due
	a.scheduled = append(a.scheduled, c)
	return &a.scheduled[len(a.scheduled)-1], nil
}

// newTopicQueues is the queue count of a topic a message creates.
func (s *Store) newTopicQueues(topic string) int32 {
	if topic == ScheduleTopic {
		return meta.ScheduleBuckets
	}
	return s.cfg.DefaultQueues
}

// deliveryQueue points a delivered copy at a queue of its real topic as the
// topic is now: created with the default queue count if it is gone, the
// queue id wrapped if the topic shrank (writeMu held).
func (s *Store) deliveryQueue(m *message.Message) {
	queues := s.cfg.DefaultQueues
	if t, ok := s.meta.Topics[m.Topic]; ok {
		queues = t.Queues
	}
	if m.QueueID < 0 || m.QueueID >= queues {
		m.QueueID = max(m.QueueID, 0) % queues
	}
}

// dueUnit is a pending scheduled record.
type dueUnit struct {
	due  int64
	unit consumequeue.Unit
}

// scanPending calls fn for every pending scheduled record (due after
// t.UpTo) in the buckets of the hours from t.UpTo's to last's, bucket by
// bucket in hour order, until fn returns false or, before a bucket,
// another (optional) says its hour need not be scanned.
func (s *Store) scanPending(t meta.Timer, lastHour int64, fn func(dueUnit) bool, another ...func(hour int64) bool) error {
	firstHour := max(t.UpTo/meta.ScheduleBucketMs, lastHour-meta.ScheduleBuckets+1)
	var units []consumequeue.Unit
	for hour := firstHour; hour <= lastHour; hour++ {
		if len(another) > 0 && !another[0](hour) {
			return nil
		}
		b := int32(hour % meta.ScheduleBuckets)
		q := s.cqs.Get(ScheduleTopic, b)
		if q == nil {
			continue
		}
		for from := max(t.Done[b], q.MinOffset()); from < q.MaxOffset(); {
			var err error
			units, err = q.Range(from, 4096, units[:0])
			if err != nil {
				return fmt.Errorf("store: schedule queue %d: %w", b, err)
			}
			if len(units) == 0 {
				break
			}
			from += int64(len(units))
			for _, u := range units {
				if u.TagsCode > t.UpTo && !fn(dueUnit{due: u.TagsCode, unit: u}) {
					return nil
				}
			}
		}
	}
	return nil
}

// DeliverDue applies a DeliverDue entry: it stores in its real topic a copy
// of every scheduled message due by h.StoreTimestamp (up to deliverBatch of
// them, the earliest due first; all of the last due time's), marked
// TIMER_DELIVERED with the new meta.Timer.UpTo, and returns how many it
// delivered. With nothing due it writes a no-op frame.
func (s *Store) DeliverDue(h EntryHeader) (int, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := s.checkWritable(h); err != nil {
		return 0, err
	}
	upto := h.StoreTimestamp
	var due []dueUnit
	err := s.scanPending(s.meta.Timer, upto/meta.ScheduleBucketMs, func(u dueUnit) bool {
		if u.due <= upto {
			due = append(due, u)
		}
		return true
	})
	if err != nil {
		return 0, s.failClosed(err)
	}
	slices.SortFunc(due, func(a, b dueUnit) int {
		if a.due != b.due {
			return int(min(max(a.due-b.due, -1), 1))
		}
		return int(min(max(a.unit.PhyOffset-b.unit.PhyOffset, -1), 1))
	})
	if len(due) > deliverBatch {
		cut := deliverBatch
		for cut < len(due) && due[cut].due == due[deliverBatch-1].due {
			cut++
		}
		due = due[:cut]
	}
	if len(due) == 0 {
		return 0, s.appendFrame(h, message.KindNoop, nil)
	}
	mark := strconv.FormatInt(due[len(due)-1].due, 10)
	msgs := make([]message.Message, 0, len(due))
	for _, u := range due {
		m, err := s.deliveryCopy(u, mark)
		if err != nil {
			return 0, s.failClosed(err)
		}
		msgs = append(msgs, m)
	}
	results, err := s.appendLocked(h, msgs, nil, true)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range results {
		if r.Err == nil {
			n++
		} else {
			s.logger.Error("a due message could not be delivered", "topic", r.Topic, "error", r.Err)
		}
	}
	s.counters.delivered.Add(uint64(n))
	return n, nil
}

// deliveryCopy reads the scheduled record of u and returns its copy for
// the real topic: REAL_TOPIC, REAL_QID, TIMER_OUT_MS and PSEQ dropped (a
// retry of the send is a duplicate of the scheduled record, not of the
// copy), TIMER_DELIVERED=mark added.
func (s *Store) deliveryCopy(u dueUnit, mark string) (message.Message, error) {
	r, err := s.log.ReadRecord(u.unit.PhyOffset)
	if err != nil {
		return message.Message{}, fmt.Errorf("store: scheduled record at %d: %w", u.unit.PhyOffset, err)
	}
	if string(r.Topic) != ScheduleTopic {
		return message.Message{}, fmt.Errorf("store: scheduled unit at %d points at a record of %q", u.unit.PhyOffset, r.Topic)
	}
	m := message.Message{Flag: r.Flag, SysFlag: r.SysFlag, BornTimestamp: r.BornTimestamp, BornHost: r.BornHost,
		ReconsumeTimes: r.ReconsumeTimes, PreparedTxOffset: r.PreparedTxOffset, Body: append([]byte(nil), r.Body...)}
	props := make([]byte, 0, len(r.Properties)+32)
	for k, v := range message.Properties(r.Properties) {
		switch string(k) {
		case message.PropertyRealTopic:
			m.Topic = string(v)
		case message.PropertyRealQueueID:
			q, err := strconv.ParseInt(string(v), 10, 32)
			if err != nil {
				return message.Message{}, fmt.Errorf("store: scheduled record at %d: REAL_QID %q", u.unit.PhyOffset, v)
			}
			m.QueueID = int32(q)
		case message.PropertyTimerOutMs, message.PropertyProducerSeq:
		default:
			props = message.AppendProperty(props, string(k), string(v))
		}
	}
	m.Properties = message.AppendProperty(props, message.PropertyTimerDelivered, mark)
	return m, nil
}

// advanceTimer records the deliveries of an entry with store time now
// just written (s.mu held): the TIMER_DELIVERED mark of its records, as
// recovery's replay reads it.
func (s *Store) advanceTimer(mark []byte, now int64) {
	s.meta.Timer.Delivered++
	if upto, err := strconv.ParseInt(string(mark), 10, 64); err == nil {
		s.meta.Timer.Advance(upto, now, s.meta.Queues)
	}
}

// timerState is a copy of meta.Timer that scans can use without s.mu.
func (s *Store) timerState() meta.Timer {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return meta.Timer{UpTo: s.meta.Timer.UpTo, Done: maps.Clone(s.meta.Timer.Done)}
}

// NextDue returns the earliest due time of a pending scheduled message, or
// false when none is pending.
func (s *Store) NextDue() (int64, bool, error) {
	t := s.timerState()
	next, found := int64(0), false
	last := t.UpTo/meta.ScheduleBucketMs + meta.ScheduleBuckets - 1
	err := s.scanPending(t, last, func(u dueUnit) bool {
		if !found || u.due < next {
			next, found = u.due, true
		}
		return true
	}, func(hour int64) bool { // a later hour's bucket holds nothing earlier
		return !found || next >= hour*meta.ScheduleBucketMs
	})
	return next, found, err
}

// ScheduledPending counts the scheduled messages not yet delivered.
func (s *Store) ScheduledPending() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.meta.Timer.Pending(s.meta.Queues)
}

// pendingMinPhy is the lowest commitlog offset of a pending scheduled
// record, or -1 with none: retention keeps the segments from there on.
func (s *Store) pendingMinPhy() (int64, error) {
	t := s.timerState()
	low := int64(-1)
	err := s.scanPending(t, t.UpTo/meta.ScheduleBucketMs+meta.ScheduleBuckets-1, func(u dueUnit) bool {
		if low < 0 || u.unit.PhyOffset < low {
			low = u.unit.PhyOffset
		}
		return true
	})
	return low, err
}

// ScheduleChanged returns a channel closed when a scheduled message is
// stored or a delivery advances the timer after the call (the scheduler
// waits on it).
func (s *Store) ScheduleChanged() <-chan struct{} {
	s.timerMu.Lock()
	defer s.timerMu.Unlock()
	if s.timerCh == nil {
		s.timerCh = make(chan struct{})
	}
	return s.timerCh
}

// scheduleChanged wakes ScheduleChanged's waiters; newDue is the earliest
// due time of the messages the entry scheduled (0: none).
func (s *Store) scheduleChanged(newDue int64) {
	s.timerMu.Lock()
	defer s.timerMu.Unlock()
	if newDue != 0 && (s.newDue == 0 || newDue < s.newDue) {
		s.newDue = newDue
	}
	if s.timerCh != nil {
		close(s.timerCh)
		s.timerCh = nil
	}
}

// TakeNewDue returns the earliest due time of the messages scheduled since
// the last call, and false if none was: a scheduler that knows the next
// due time keeps it current without scanning the schedule queues again.
func (s *Store) TakeNewDue() (int64, bool) {
	s.timerMu.Lock()
	defer s.timerMu.Unlock()
	d := s.newDue
	s.newDue = 0
	return d, d != 0
}

// TimerUpTo is meta.Timer.UpTo: every scheduled message due at or before
// it has been delivered.
func (s *Store) TimerUpTo() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.meta.Timer.UpTo
}
