package store

import (
	"fmt"
)

// cmdUpdateTopic is the command frame of UpdateTopic (the others are in
// meta.go): name str, queues u32, perm u32, where 0 keeps the current value.
// Replay resolves the zeros against the topic as it is at that point of the
// log, which is the same on every replica.
const cmdUpdateTopic byte = 4

// maxPerm bounds a topic's permission bits (RocketMQ's PRIORITY|READ|WRITE|INHERIT).
const maxPerm = 15

func encodeUpdateTopic(t TopicConfig) []byte { return encodeTopicFrame(cmdUpdateTopic, t) }

// UpdateTopic changes an existing topic's queue count and permission. The
// queue count may only grow (queues and their offsets are never dropped);
// a zero Queues or Perm keeps the current value. ErrNoSuchTopic, ErrBadQueue
// (shrinking, or above MaxQueues) and ErrBadCommand (perm out of range) are
// deterministic: nothing is written (the FSM then calls MarkApplied).
func (s *Store) UpdateTopic(h EntryHeader, t TopicConfig) error {
	if t.Queues < 0 || t.Queues > s.cfg.MaxQueues {
		return fmt.Errorf("%w: %d queues (1-%d)", ErrBadQueue, t.Queues, s.cfg.MaxQueues)
	}
	if t.Perm < 0 || t.Perm > maxPerm {
		return fmt.Errorf("%w: perm %d (0-%d)", ErrBadCommand, t.Perm, maxPerm)
	}
	return s.command(h, encodeUpdateTopic(t), func() error {
		cur, ok := s.meta.topics[t.Name]
		switch {
		case !ok:
			return fmt.Errorf("%w: %q", ErrNoSuchTopic, t.Name)
		case t.Queues != 0 && t.Queues < cur.Queues:
			return fmt.Errorf("%w: %q has %d queues, cannot shrink to %d", ErrBadQueue, t.Name, cur.Queues, t.Queues)
		case t.Queues > cur.Queues && s.meta.totalQueues()+int(t.Queues-cur.Queues) > s.cfg.MaxTotalQueues:
			return fmt.Errorf("%w (%d): growing %q from %d to %d queues", ErrQueueLimit, s.cfg.MaxTotalQueues, t.Name, cur.Queues, t.Queues)
		}
		return nil
	})
}

// updateTopic applies an update frame to m (a missing topic is left alone:
// the live path refused such an update before writing it).
func (m *meta) updateTopic(name string, queues, perm int32) {
	cur, ok := m.topics[name]
	if !ok {
		return
	}
	if queues != 0 {
		cur.Queues = queues
	}
	if perm != 0 {
		cur.Perm = perm
	}
	m.topics[name] = cur
}
