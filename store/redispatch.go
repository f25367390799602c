package store

import (
	"fmt"

	"github.com/raftmq/raftmq/commitlog"
)

// replayScope says what redispatch does with each entry.
type replayScope struct {
	// dispatchOnly: rebuild consume queues and index only; meta already
	// reflects these entries (lag repair, snapshot install).
	dispatchOnly bool
	// queues, if not nil, restricts dispatch to these queues.
	queues map[queueKey]bool
}

func (r replayScope) wants(k queueKey) bool { return r.queues == nil || r.queues[k] }

// redispatch replays the verified entries in [from, to): command frames onto
// meta, message records into consume queues, index and queue table. Puts are
// idempotent, so what the files already hold is skipped.
func (s *Store) redispatch(from, to int64, only replayScope) error {
	if from >= to {
		return nil
	}
	sc := commitlog.NewScanner(s.log, from)
	for {
		e, err := sc.Next()
		if err != nil {
			return fmt.Errorf("store: redispatch at %d: %w", from, err)
		}
		if e.Start >= to {
			return nil
		}
		if err := s.replayEntry(e, only); err != nil {
			return err
		}
		if e.End >= to {
			return nil
		}
	}
}

func (s *Store) replayEntry(e commitlog.Entry, only replayScope) error {
	switch e.Header.Kind {
	case commitlog.KindCommand:
		if only.dispatchOnly {
			return nil
		}
		if err := s.meta.applyCommand(e.Command); err != nil {
			return fmt.Errorf("store: replay command at %d: %w", e.Start, err)
		}
		if e.Command[0] == cmdDeleteTopic {
			d := decoder{b: e.Command[1:]}
			return s.cqs.DeleteTopic(d.str())
		}
		return nil
	case commitlog.KindMessages:
		return e.ForEachRecord(func(off int64, r commitlog.Record) error {
			return s.replayRecord(off, r, e.Header.StoreTimestamp, only)
		})
	}
	return nil
}

func (s *Store) replayRecord(off int64, r commitlog.Record, storeTs int64, only replayScope) error {
	k := queueKey{string(r.Topic), r.QueueID}
	if !only.wants(k) {
		return nil
	}
	if only.dispatchOnly {
		if _, ok := s.meta.topics[k.topic]; !ok {
			return nil // deleted since
		}
		return s.dispatchOne(k.topic, k.queue, r.QueueOffset, commitlog.RecordPos{Offset: off, Size: r.Size}, r.Properties, storeTs)
	}
	if _, ok := s.meta.topics[k.topic]; !ok {
		s.meta.topics[k.topic] = TopicConfig{Name: k.topic, Queues: s.cfg.DefaultQueues, Perm: 6}
	}
	if next := r.QueueOffset + 1; next > s.meta.queues[k] {
		s.meta.queues[k] = next
	}
	return s.dispatchOne(k.topic, k.queue, r.QueueOffset, commitlog.RecordPos{Offset: off, Size: r.Size}, r.Properties, storeTs)
}

// repairLaggingQueues finds queues whose consume queue holds fewer units
// than the queue table says were written below scanFrom (a lost or deleted
// consume-queue file, a snapshot install) and rebuilds them from the
// commitlog start. The index is rebuilt along with them when it lags.
func (s *Store) repairLaggingQueues(scanFrom int64) error {
	lagging := map[queueKey]bool{}
	for k, next := range s.meta.queues {
		q := s.cqs.Get(k.topic, k.queue)
		if q == nil || q.MaxOffset() < next {
			lagging[k] = true
		}
	}
	if len(lagging) == 0 {
		return nil
	}
	s.logger.Warn("rebuilding lagging consume queues from the commitlog", "queues", len(lagging), "from", s.log.MinOffset())
	return s.redispatch(s.log.MinOffset(), scanFrom, replayScope{dispatchOnly: true, queues: lagging})
}
