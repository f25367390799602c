package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/raftmq/raftmq/meta"
	"io"

	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/consumequeue"
	"github.com/raftmq/raftmq/index"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/recovery"
)

// replayScope says what redispatch does with each entry.
type replayScope struct {
	// dispatchOnly: rebuild consume queues and index only; meta already
	// reflects these entries (lag repair, snapshot install).
	dispatchOnly bool
	// queues, if not nil, restricts dispatch to these queues.
	queues map[meta.QueueKey]bool
	// indexOnly (with dispatchOnly): the index alone, every record as the
	// apply path indexed it, whether or not its topic still exists.
	indexOnly bool
}

func (r replayScope) wants(k meta.QueueKey) bool { return r.queues == nil || r.queues[k] }

// redispatch replays the verified entries in [from, to): command frames onto
// meta, message records into consume queues, index and queue table. Puts are
// idempotent, so what the files already hold is skipped. The scan (verify)
// and the replay run as a pipeline (see runPipeline).
func (s *Store) redispatch(from, to int64, only replayScope) error {
	if from >= to {
		return nil
	}
	scan := func(send func(*commitlog.Entry) error) error {
		sc := commitlog.NewScanner(s.log, from)
		for {
			e, err := sc.Next()
			if err != nil {
				return fmt.Errorf("store: redispatch at %d: %w", sc.Pos(), err)
			}
			if e.Start >= to {
				return nil
			}
			if err := send(&e); err != nil {
				return err
			}
			if e.End >= to {
				return nil
			}
		}
	}
	return s.runPipeline(scan, only)
}

// replayTail verifies the commitlog tail above the checkpoint (p.ScanTail
// sets confirmOffset) and replays every verified entry, which by ScanTail's
// contract all lie below the final confirmOffset.
func (s *Store) replayTail(p *recovery.Plan) error {
	return s.runPipeline(func(send func(*commitlog.Entry) error) error {
		return p.ScanTail(s.log, s.logger, send)
	}, replayScope{})
}

// Pipeline sizes: a batch is handed over when it holds this many entries or
// bytes; pipelineDepth batches may wait between the two stages.
const (
	pipelineBatchEntries = 256
	pipelineBatchBytes   = 1 << 20
	pipelineDepth        = 4
)

// errPipelineStopped is what the producer's send returns once the replay
// side has failed.
var errPipelineStopped = errors.New("store: replay stopped")

// runPipeline runs scan (which verifies entries and calls send with each, in
// log order) in its own goroutine and replays the entries here, so that
// verification (CRC32C over every byte) and dispatch (consume queues, index,
// meta) run on two cores. The scanning goroutine also prepares each record
// (fields, TAGS code, index key hashes: prepareRecords) so that the replay
// side only writes. The entries alias the commitlog mapping, which stays
// mapped: nothing unmaps segments during recovery. The goroutine is always
// finished when runPipeline returns: a replay error stops the producer
// through send; a producer error ends the stream.
func (s *Store) runPipeline(scan func(send func(*commitlog.Entry) error) error, only replayScope) error {
	full := make(chan *replayBatch, pipelineDepth)
	free := make(chan *replayBatch, pipelineDepth+2)
	stop := make(chan struct{})
	var scanErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(full)
		batch := newReplayBatch()
		var size int64
		hand := func() error {
			select {
			case full <- batch:
			case <-stop:
				return errPipelineStopped
			}
			select {
			case batch = <-free:
			default:
				batch = newReplayBatch()
			}
			size = 0
			return nil
		}
		scanErr = scan(func(e *commitlog.Entry) error {
			if err := batch.add(e); err != nil {
				return err
			}
			size += e.End - e.Start
			if len(batch.entries) >= pipelineBatchEntries || size >= pipelineBatchBytes {
				return hand()
			}
			return nil
		})
		if scanErr == nil && len(batch.entries) > 0 {
			scanErr = hand()
		}
	}()
	r := newReplayer(s, only)
	var err error
	for batch := range full {
		if err == nil {
			var n int
			n, err = r.batch(batch)
			s.recoveryReplayed += n
		}
		if err != nil && stop != nil {
			close(stop)
			stop = nil
		}
		batch.reset()
		select {
		case free <- batch:
		default:
		}
	}
	<-done
	if err == nil {
		r.syncMeta()
	}
	if err == nil && scanErr != nil && !errors.Is(scanErr, errPipelineStopped) {
		err = scanErr
	}
	return err
}

// replayBatch is what the scanning goroutine hands to the replay: verified
// entries and their records, prepared.
type replayBatch struct {
	entries []commitlog.Entry
	recEnd  []int // per entry: end of its records in recs
	recs    []preparedRecord
	hashes  []int32 // index key hashes of all records
}

// preparedRecord is a message record reduced to what dispatch writes.
type preparedRecord struct {
	off              int64
	size             int32
	queueID          int32
	queueOffset      int64
	topic            []byte // aliases the mapping
	tagsCode         int64
	hashFrom, hashTo int
}

func newReplayBatch() *replayBatch {
	return &replayBatch{entries: make([]commitlog.Entry, 0, pipelineBatchEntries)}
}

func (b *replayBatch) reset() {
	clear(b.entries)
	b.entries, b.recEnd, b.recs, b.hashes = b.entries[:0], b.recEnd[:0], b.recs[:0], b.hashes[:0]
}

// add appends a verified entry and prepares its records.
func (b *replayBatch) add(e *commitlog.Entry) error {
	b.entries = append(b.entries, *e)
	if e.Header.Kind == message.KindMessages {
		if err := b.prepareRecords(e); err != nil {
			return err
		}
	}
	b.recEnd = append(b.recEnd, len(b.recs))
	return nil
}

// prepareRecords reads each record of a verified entry: queue, offsets,
// TAGS code and the hashes of its index keys.
func (b *replayBatch) prepareRecords(e *commitlog.Entry) error {
	off := e.End - int64(len(e.Records))
	for rb := e.Records; len(rb) > 0; {
		rec, err := recordView(rb)
		if err != nil {
			return fmt.Errorf("store: replay record at %d: %w", off, err)
		}
		tags, keys, uniq := recordKeys(rec.props)
		from := len(b.hashes)
		b.hashes = index.MessageKeyHashes(b.hashes, rec.topic, keys, uniq)
		b.recs = append(b.recs, preparedRecord{
			off: off, size: rec.size, queueID: rec.queueID, queueOffset: rec.queueOffset, topic: rec.topic,
			tagsCode: message.TagsCodeBytes(tags), hashFrom: from, hashTo: len(b.hashes),
		})
		rb = rb[rec.size:]
		off += int64(rec.size)
	}
	return nil
}

// replayer applies verified entries to meta, consume queues and index. It
// caches per topic and queue what every record would otherwise look up (the
// consume queue, the queue table's next offset, whether the topic exists)
// so that a record costs no allocation and no map lookup with a built key.
// The cached next offsets are written back to meta before a command entry
// is applied and at the end (syncMeta); a command drops the cache.
type replayer struct {
	s      *Store
	only   replayScope
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

func newReplayer(s *Store, only replayScope) *replayer {
	return &replayer{s: s, only: only, topics: map[string]*replayTopic{}}
}

// batch replays a prepared batch and returns how many entries it replayed.
func (r *replayer) batch(b *replayBatch) (int, error) {
	ri := 0
	for k := range b.entries {
		e := &b.entries[k]
		switch e.Header.Kind {
		case message.KindCommand:
			if !r.only.dispatchOnly {
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
	if err := r.s.meta.Apply(e.Command); err != nil {
		return fmt.Errorf("store: replay command at %d: %w", e.Start, err)
	}
	if name, ok := meta.DeletedTopic(e.Command); ok {
		return r.s.cqs.DeleteTopic(name)
	}
	return nil
}

func (r *replayer) record(rec *preparedRecord, storeTs int64, hashes []int32) error {
	if r.only.indexOnly {
		if len(hashes) == 0 {
			return nil
		}
		return r.s.idx.PutMessageHashes(hashes, rec.off, storeTs)
	}
	t := r.topic(rec.topic)
	if t.skip {
		return nil
	}
	q, err := r.queue(t, rec.queueID)
	if err != nil || q == nil {
		return err
	}
	if !r.only.dispatchOnly && rec.queueOffset+1 > q.next {
		q.next = rec.queueOffset + 1
		if !q.dirty {
			q.dirty = true
			r.dirty = append(r.dirty, q)
		}
	}
	unit := consumequeue.Unit{PhyOffset: rec.off, Size: rec.size, TagsCode: rec.tagsCode}
	if err := q.cq.Put(rec.queueOffset, unit); err != nil {
		return fmt.Errorf("store: consume queue %s/%d offset %d: %w", q.key.Topic, q.key.Queue, rec.queueOffset, err)
	}
	if len(hashes) == 0 {
		return nil
	}
	return r.s.idx.PutMessageHashes(hashes, rec.off, storeTs)
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
	_, exists := r.s.meta.Topics[t.name]
	switch {
	case r.only.dispatchOnly:
		t.skip = !exists // deleted since
	case !exists:
		r.s.meta.Topics[t.name] = TopicConfig{Name: t.name, Queues: r.s.cfg.DefaultQueues, Perm: 6}
	}
	r.topics[t.name] = t
	r.last = t
	return t
}

// queue returns the cache entry of a queue, or nil if the scope skips it.
func (r *replayer) queue(t *replayTopic, id int32) (*replayQueue, error) {
	if id < 0 {
		return nil, fmt.Errorf("store: replay: queue id %d", id)
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
	q := &replayQueue{key: k, wanted: r.only.wants(k), next: r.s.meta.Queues[k]}
	t.queues[id] = q
	if !q.wanted {
		return nil, nil
	}
	cq, err := r.s.cqs.GetOrCreate(k.Topic, k.Queue)
	if err != nil {
		return nil, fmt.Errorf("store: consume queue %s/%d: %w", k.Topic, k.Queue, err)
	}
	q.cq = cq
	return q, nil
}

// syncMeta writes the cached next offsets back to the queue table.
func (r *replayer) syncMeta() {
	for _, q := range r.dirty {
		if q.next > r.s.meta.Queues[q.key] {
			r.s.meta.Queues[q.key] = q.next
		}
		q.dirty = false
	}
	r.dirty = r.dirty[:0]
}

// replayRecord is what replay reads of a verified message record.
type replayRecord struct {
	size        int32
	queueID     int32
	queueOffset int64
	topic       []byte
	props       []byte
}

// recordView reads the fields replay needs from a record the scanner has
// verified (structure, position and the entry CRC). It still bounds every
// slice, so a caller passing unverified bytes gets an error, not a panic.
func recordView(b []byte) (replayRecord, error) {
	if len(b) < message.RecordFixedSize {
		return replayRecord{}, io.ErrUnexpectedEOF
	}
	size := int32(be32(b[message.OffTotalSize:]))
	bodyLen := int(int32(be32(b[message.OffBodyLength:])))
	if size < message.RecordFixedSize || int(size) > len(b) || bodyLen < 0 || message.OffBody+bodyLen+3 > int(size) {
		return replayRecord{}, fmt.Errorf("%w: TOTALSIZE %d BODYLENGTH %d", message.ErrCorrupt, size, bodyLen)
	}
	rb := b[:size]
	p := message.OffBody + bodyLen
	topicLen := int(int8(rb[p]))
	if topicLen <= 0 || p+1+topicLen+2 > len(rb) {
		return replayRecord{}, fmt.Errorf("%w: TOPICLENGTH %d", message.ErrCorrupt, topicLen)
	}
	topic := rb[p+1 : p+1+topicLen]
	p += 1 + topicLen + 2
	return replayRecord{
		size:        size,
		queueID:     int32(be32(rb[message.OffQueueID:])),
		queueOffset: int64(be64(rb[message.OffQueueOffset:])),
		topic:       topic,
		props:       rb[p:],
	}, nil
}

func be32(b []byte) uint32 { return binary.BigEndian.Uint32(b) }
func be64(b []byte) uint64 { return binary.BigEndian.Uint64(b) }

// recordKeys finds TAGS, KEYS and UNIQ_KEY in one pass over the properties
// (name 0x01 value 0x02, repeated); like message.GetProperty, the first
// occurrence of a name wins and a pair without 0x01 is skipped. Properties
// are short, so a byte loop beats a call to bytes.IndexByte per separator.
func recordKeys(props []byte) (tags, keys, uniq []byte) {
	var haveTags, haveKeys, haveUniq bool
	for len(props) > 0 && !(haveTags && haveKeys && haveUniq) {
		i := 0
		for i < len(props) && props[i] != 0x01 && props[i] != 0x02 {
			i++
		}
		if i == len(props) || props[i] == 0x02 { // no name/value separator
			props = props[min(i+1, len(props)):]
			continue
		}
		name := props[:i]
		j := i + 1
		for j < len(props) && props[j] != 0x02 {
			j++
		}
		value := props[i+1 : j]
		props = props[min(j+1, len(props)):]
		switch {
		case !haveKeys && string(name) == message.PropertyKeys:
			keys, haveKeys = value, true
		case !haveUniq && string(name) == message.PropertyUniqKey:
			uniq, haveUniq = value, true
		case !haveTags && string(name) == message.PropertyTags:
			tags, haveTags = value, true
		}
	}
	return tags, keys, uniq
}

// repairLaggingQueues finds queues whose consume queue holds fewer units
// than the queue table says were written below scanFrom (a lost or deleted
// consume-queue file, a snapshot install) and rebuilds them from the
// commitlog start. The index is rebuilt along with them when it lags.
func (s *Store) repairLaggingQueues(scanFrom int64) error {
	lagging := map[meta.QueueKey]bool{}
	for k, next := range s.meta.Queues {
		q := s.cqs.Get(k.Topic, k.Queue)
		if q == nil || q.MaxOffset() < next {
			lagging[k] = true
		}
	}
	if len(lagging) == 0 {
		return nil
	}
	s.logger.Warn("rebuilding lagging consume queues from the commitlog", "queues", len(lagging), "from", s.log.MinOffset())
	for k := range lagging {
		if q := s.cqs.Get(k.Topic, k.Queue); q != nil {
			q.Unflush() // see rebuildIfMarked
		}
	}
	return s.redispatch(s.log.MinOffset(), scanFrom, replayScope{dispatchOnly: true, queues: lagging})
}
