package store

import "github.com/raftmq/raftmq/meta"

import "sort"

// GroupQueue is a consumer group's progress in one queue: what it committed
// and how far behind the queue's end that is.
type GroupQueue struct {
	Group     string
	Topic     string
	QueueID   int32
	Committed int64 // the committed offset; NoCommit if the group committed none here
	Min, Max  int64 // the queue's min offset and max (next) offset
	Lag       int64 // messages the group has still to read (see GroupProgress)
}

// NoCommit is GroupQueue.Committed of a queue the group has no offset for.
const NoCommit = -1

// GroupProgress returns the progress of group ("" = every group) in every
// queue of topic ("" = every topic the group has committed an offset in),
// sorted by group, topic and queue. A group is listed with the topics it
// has committed offsets in; with a topic given, every queue of that topic
// is listed for the group even where it committed nothing (so group ""
// with a topic lists only the groups known in that topic).
//
// Lag is Max - Committed, floored at 0 (a commit beyond the end lags by 0);
// in a queue without a committed offset it is Max - Min, what a consumer
// starting at the queue's min offset has to read. It is a point-in-time view
// of this store: messages and commits applied meanwhile may be missing.
func (s *Store) GroupProgress(group, topic string) []GroupQueue {
	s.mu.RLock()
	committed := map[meta.OffsetKey]int64{}
	pairs := map[[2]string]int32{} // (group, topic) -> queue count
	for k, off := range s.meta.Offsets {
		if group != "" && k.Group != group || topic != "" && k.Topic != topic {
			continue
		}
		t, ok := s.meta.Topics[k.Topic]
		if !ok {
			continue
		}
		committed[k] = off
		pairs[[2]string{k.Group, k.Topic}] = t.Queues
	}
	if t, ok := s.meta.Topics[topic]; ok && group != "" {
		pairs[[2]string{group, topic}] = t.Queues
	}
	s.mu.RUnlock()

	keys := make([][2]string, 0, len(pairs))
	for k := range pairs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	var out []GroupQueue
	for _, k := range keys {
		for q := int32(0); q < pairs[k]; q++ {
			g := GroupQueue{Group: k[0], Topic: k[1], QueueID: q, Committed: NoCommit}
			if off, ok := committed[meta.OffsetKey{Group: k[0], QueueKey: meta.QueueKey{Topic: k[1], Queue: q}}]; ok {
				g.Committed = off
			}
			if cq, err := s.queue(k[1], q); err == nil && cq != nil {
				g.Min, g.Max = cq.MinOffset(), cq.MaxOffset()
			}
			g.Lag = lag(g)
			out = append(out, g)
		}
	}
	return out
}

// lag is what GroupProgress documents.
func lag(g GroupQueue) int64 {
	from := g.Committed
	if from == NoCommit {
		from = g.Min
	}
	return max(0, g.Max-from)
}
