package store

import (
	"fmt"
	"github.com/raftmq/raftmq/meta"
)

// maxPerm bounds a topic's permission bits (RocketMQ's PRIORITY|READ|WRITE|INHERIT).
const maxPerm = 15

// UpdateTopic changes an existing topic's queue count and permission. The
// queue count may only grow (queues and their offsets are never dropped);
// a zero Queues or Perm keeps the current value. ErrNoSuchTopic, ErrBadQueue
// (shrinking, or above MaxQueues) and ErrBadCommand (perm out of range) are
// deterministic: nothing is written (the FSM then calls MarkApplied).
func (s *Store) UpdateTopic(h EntryHeader, t TopicConfig) error {
	if err := notSchedule(t.Name); err != nil {
		return err
	}
	if t.Queues < 0 || t.Queues > s.cfg.MaxQueues {
		return fmt.Errorf("%w: %d queues (1-%d)", ErrBadQueue, t.Queues, s.cfg.MaxQueues)
	}
	if t.Perm < 0 || t.Perm > maxPerm {
		return fmt.Errorf("%w: perm %d (0-%d)", ErrBadCommand, t.Perm, maxPerm)
	}
	return s.command(h, (&meta.Command{Type: meta.UpdateTopic, Topic: t}).Frame(), func() error {
		cur, ok := s.meta.Topics[t.Name]
		switch {
		case !ok:
			return fmt.Errorf("%w: %q", ErrNoSuchTopic, t.Name)
		case t.Queues != 0 && t.Queues < cur.Queues:
			return fmt.Errorf("%w: %q has %d queues, cannot shrink to %d", ErrBadQueue, t.Name, cur.Queues, t.Queues)
		case t.Queues > cur.Queues && s.meta.TotalQueues()+int(t.Queues-cur.Queues) > s.cfg.MaxTotalQueues:
			return fmt.Errorf("%w (%d): growing %q from %d to %d queues", ErrQueueLimit, s.cfg.MaxTotalQueues, t.Name, cur.Queues, t.Queues)
		}
		return nil
	})
}
