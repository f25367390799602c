package store

import (
	"errors"
	"sort"
	"sync"

	"github.com/raftmq/raftmq/consumequeue"
	"github.com/raftmq/raftmq/index"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/meta"
)

// unitTrust says which consume-queue units a tag-filtered read may skip on
// their tagsCode alone. A unit carries no checksum, and a flipped tagsCode
// would hide its message from every consumer filtering by tag. Units this
// process dispatched (at or above a queue's unit count at open) are
// trusted; an older unit is trusted once a read has checked it against its
// record (position, size, queue, topic and the entry's CRC32C by
// commitlog.ReadRecordRef, then tagsCode against the record's TAGS). So a
// tag-filtered consumer of old data reads each record once per process,
// and skips by tagsCode afterwards.
type unitTrust struct {
	atOpen map[meta.QueueKey]int64 // unit count per queue when Open returned; read-only after

	mu       sync.Mutex
	verified map[meta.QueueKey][]unitSpan // sorted, disjoint, below atOpen
}

// unitSpan is a run [lo, hi) of checked queue offsets.
type unitSpan struct{ lo, hi int64 }

func newUnitTrust(queues []*consumequeue.Queue) *unitTrust {
	t := &unitTrust{atOpen: make(map[meta.QueueKey]int64, len(queues)), verified: map[meta.QueueKey][]unitSpan{}}
	for _, q := range queues {
		t.atOpen[meta.QueueKey{Topic: q.Topic(), Queue: q.QueueID()}] = q.MaxOffset()
	}
	return t
}

// window is what a read from offset needs: units in [offset, checkedTo)
// and at or above dispatched are trusted; the others must be checked.
func (t *unitTrust) window(k meta.QueueKey, offset int64) (checkedTo, dispatched int64) {
	dispatched = t.atOpen[k]
	if offset >= dispatched {
		return offset, dispatched
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	spans := t.verified[k]
	i := sort.Search(len(spans), func(i int) bool { return spans[i].hi > offset })
	if i < len(spans) && spans[i].lo <= offset {
		return spans[i].hi, dispatched
	}
	return offset, dispatched
}

// checked records that a read checked (or trusted) every unit in [lo, hi).
func (t *unitTrust) checked(k meta.QueueKey, lo, hi int64) {
	hi = min(hi, t.atOpen[k])
	if lo >= hi {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	spans := append(t.verified[k], unitSpan{lo, hi})
	sort.Slice(spans, func(i, j int) bool { return spans[i].lo < spans[j].lo })
	merged := spans[:1]
	for _, sp := range spans[1:] {
		last := &merged[len(merged)-1]
		if sp.lo <= last.hi {
			last.hi = max(last.hi, sp.hi)
			continue
		}
		merged = append(merged, sp)
	}
	t.verified[k] = merged
}

// corrupted counts err in Stats.Corruptions when it reports damaged data,
// and returns it. Damage in a consume queue or the index (data derived
// from the commitlog, which verified where it was read) also leaves the
// rebuild marker: the next Open rebuilds them from the commitlog.
func (s *Store) corrupted(err error) error {
	switch {
	case errors.Is(err, consumequeue.ErrCorrupt), errors.Is(err, index.ErrCorrupt):
		s.counters.corruptions.Add(1)
		s.markRebuild(err)
	case errors.Is(err, message.ErrCorrupt):
		s.counters.corruptions.Add(1)
	}
	return err
}

// markRebuild writes the rebuild marker (FORMAT.md §10), synced with its
// directory, once per store.
func (s *Store) markRebuild(cause error) {
	if !s.rebuildMarked.CompareAndSwap(false, true) {
		return
	}
	err := writeMarker(s.fs, s.cfg.Dir)
	if err == nil {
		err = s.fs.SyncDir(s.cfg.Dir)
	}
	if err != nil {
		s.rebuildMarked.Store(false)
		s.logger.Error("damaged consume queue or index; the rebuild marker could not be written", "cause", cause, "error", err)
		return
	}
	s.logger.Error("damaged consume queue or index: rebuilt from the commitlog at the next start", "cause", cause)
}
