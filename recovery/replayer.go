package recovery

import (
	"fmt"
	"strconv"

	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/consumequeue"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/meta"
)

// replayer applies verified entries to meta, consume queues and index. It
// caches per topic and queue what every record would otherwise look up (the
// consume queue, the queue table's next offset, whether the topic exists)
// so that a record costs no allocation and no map lookup with a built key.
// The cached next offsets are written back to meta before a command entry
// is applied and at the end (syncMeta); a command drops the cache.
type replayer struct {
	t      Target
	only   Scope
	topics map[string]*replayTopic
	last   *replayTopic // the topic of the previous record (most entries have one)
	dirty  []*replayQueue
}

type replayTopic struct {
	name   string
	skip   bool // dispatchOnly and the topic no longer exists
	queues []*replayQueue
}

type replayQueue struct {
	key    meta.QueueKey
	wanted bool
	cq     *consumequeue.Queue
	next   int64 // queue table's next offset (not dispatchOnly)
	dirty  bool
}

func newReplayer(t Target, only Scope) *replayer {
	return &replayer{t: t, only: only, topics: map[string]*replayTopic{}}
}

// batch replays a prepared batch and returns how many entries it replayed.
func (r *replayer) batch(b *replayBatch) (int, error) {
	ri := 0
	for k := range b.entries {
		e := &b.entries[k]
		switch e.Header.Kind {
		case message.KindCommand:
			if !r.only.DispatchOnly {
				if err := r.command(e); err != nil {
					return k, err
				}
			}
		case message.KindMessages:
			for ; ri < b.recEnd[k]; ri++ {
				rec := &b.recs[ri]
				if err := r.record(rec, e.Header.StoreTimestamp, b.hashes[rec.hashFrom:rec.hashTo]); err != nil {
					return k, err
				}
			}
		}
	}
	return len(b.entries), nil
}

func (r *replayer) command(e *commitlog.Entry) error {
	r.syncMeta()
	clear(r.topics)
	r.last = nil
	if err := r.t.Meta().Apply(e.Command); err != nil {
		return fmt.Errorf("recovery: replay command at %d: %w", e.Start, err)
	}
	if name, ok := meta.DeletedTopic(e.Command); ok {
		return r.t.ConsumeQueues().DeleteTopic(name)
	}
	return nil
}

func (r *replayer) record(rec *preparedRecord, storeTs int64, hashes []int32) error {
	if r.only.IndexOnly {
		if len(hashes) == 0 {
			return nil
		}
		return r.t.Index().PutMessageHashes(hashes, rec.off, storeTs)
	}
	if rec.pseq != nil && !r.only.DispatchOnly {
		r.storeProducerSeq(rec, storeTs)
	}
	if rec.delivered != nil && !r.only.DispatchOnly {
		r.advanceTimer(rec.delivered, storeTs)
	}
	t := r.topic(rec.topic)
	if t.skip {
		return nil
	}
	q, err := r.queue(t, rec.queueID)
	if err != nil || q == nil {
		return err
	}
	if !r.only.DispatchOnly && rec.queueOffset+1 > q.next {
		q.next = rec.queueOffset + 1
		if !q.dirty {
			q.dirty = true
			r.dirty = append(r.dirty, q)
		}
	}
	unit := consumequeue.Unit{PhyOffset: rec.off, Size: rec.size, TagsCode: rec.tagsCode}
	if err := q.cq.Put(rec.queueOffset, unit); err != nil {
		return fmt.Errorf("recovery: consume queue %s/%d offset %d: %w", q.key.Topic, q.key.Queue, rec.queueOffset, err)
	}
	if len(hashes) == 0 {
		return nil
	}
	return r.t.Index().PutMessageHashes(hashes, rec.off, storeTs)
}

// storeProducerSeq records an idempotent message in the producer table as
// the apply path did when it wrote the record. A PSEQ that does not parse
// was never written by the apply path (it refuses such messages) and is
// skipped.
func (r *replayer) storeProducerSeq(rec *preparedRecord, storeTs int64) {
	producer, seq, err := message.ParseProducerSeq(rec.pseq)
	if err != nil {
		return
	}
	r.t.Meta().Producers.Store(producer, seq, storeTs)
}

// advanceTimer records a delivered scheduled message's mark as the apply
// path did after writing it (meta.Timer.Advance with the queue table).
func (r *replayer) advanceTimer(mark []byte, storeTs int64) {
	r.t.Meta().Timer.Delivered++
	upto, err := strconv.ParseInt(string(mark), 10, 64)
	if err != nil {
		return
	}
	r.syncMeta()
	r.t.Meta().Timer.Advance(upto, storeTs, r.t.Meta().Queues)
}

// topic returns the cache entry of a topic, creating the topic in meta the
// first time a record names it (as the apply path does).
func (r *replayer) topic(name []byte) *replayTopic {
	if r.last != nil && r.last.name == string(name) {
		return r.last
	}
	if t, ok := r.topics[string(name)]; ok {
		r.last = t
		return t
	}
	t := &replayTopic{name: string(name)}
	_, exists := r.t.Meta().Topics[t.name]
	switch {
	case r.only.DispatchOnly:
		t.skip = !exists // deleted since
	case !exists && t.name == meta.ScheduleTopic:
		r.t.Meta().Topics[t.name] = meta.TopicConfig{Name: t.name, Queues: meta.ScheduleBuckets, Perm: 6}
	case !exists:
		r.t.Meta().Topics[t.name] = meta.TopicConfig{Name: t.name, Queues: r.t.DefaultQueues(), Perm: 6}
	}
	r.topics[t.name] = t
	r.last = t
	return t
}

// queue returns the cache entry of a queue, or nil if the scope skips it.
func (r *replayer) queue(t *replayTopic, id int32) (*replayQueue, error) {
	if id < 0 {
		return nil, fmt.Errorf("recovery: replay: queue id %d", id)
	}
	if int(id) < len(t.queues) && t.queues[id] != nil {
		q := t.queues[id]
		if !q.wanted {
			return nil, nil
		}
		return q, nil
	}
	for len(t.queues) <= int(id) {
		t.queues = append(t.queues, nil)
	}
	k := meta.QueueKey{Topic: t.name, Queue: id}
	q := &replayQueue{key: k, wanted: r.only.wants(k), next: r.t.Meta().Queues[k]}
	t.queues[id] = q
	if !q.wanted {
		return nil, nil
	}
	cq, err := r.t.ConsumeQueues().GetOrCreate(k.Topic, k.Queue)
	if err != nil {
		return nil, fmt.Errorf("recovery: consume queue %s/%d: %w", k.Topic, k.Queue, err)
	}
	q.cq = cq
	return q, nil
}

// syncMeta writes the cached next offsets back to the queue table.
func (r *replayer) syncMeta() {
	for _, q := range r.dirty {
		if q.next > r.t.Meta().Queues[q.key] {
			r.t.Meta().Queues[q.key] = q.next
		}
		q.dirty = false
	}
	r.dirty = r.dirty[:0]
}
