package recovery

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/index"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/meta"
)

// Pipeline sizes: a batch is handed over when it holds this many entries or
// bytes; pipelineDepth batches may wait between the two stages.
const (
	pipelineBatchEntries = 256
	pipelineBatchBytes   = 1 << 20
	pipelineDepth        = 4
)

// errPipelineStopped is what the producer's send returns once the replay
// side has failed.
var errPipelineStopped = errors.New("recovery: replay stopped")

// runPipeline runs scan (which verifies entries and calls send with each, in
// log order) in its own goroutine and replays the entries here, so that
// verification (CRC32C over every byte) and dispatch (consume queues, index,
// meta) run on two cores. The scanning goroutine also prepares each record
// (fields, TAGS code, index key hashes: prepareRecords) so that the replay
// side only writes. The entries alias the commitlog mapping, which stays
// mapped: nothing unmaps segments during recovery. The goroutine is always
// finished when runPipeline returns: a replay error stops the producer
// through send; a producer error ends the stream.
func (r *Replay) runPipeline(scan func(send func(*commitlog.Entry) error) error, only Scope) error {
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
	rp := newReplayer(r.Target, only)
	var err error
	for batch := range full {
		if err == nil {
			var n int
			n, err = rp.batch(batch)
			r.Replayed += n
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
		rp.syncMeta()
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
	pseq             []byte // PSEQ property (idempotent send), aliases the mapping; nil: none
	delivered        []byte // TIMER_DELIVERED (a delivered scheduled message), aliases the mapping
}

// tagsCode is a record's consume-queue tagsCode as the store's dispatch
// computes it: the hash of TAGS, or for a record of the schedule topic its
// due time (TIMER_OUT_MS).
func tagsCode(topic []byte, sp *message.StoreProperties) int64 {
	if string(topic) == meta.ScheduleTopic {
		if due, err := strconv.ParseInt(string(sp.TimerOut), 10, 64); err == nil {
			return due
		}
	}
	return message.TagsCodeBytes(sp.Tags)
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
			return fmt.Errorf("recovery: replay record at %d: %w", off, err)
		}
		sp := message.ReadStoreProperties(rec.props)
		from := len(b.hashes)
		b.hashes = index.MessageKeyHashes(b.hashes, rec.topic, sp.Keys, sp.Uniq)
		b.recs = append(b.recs, preparedRecord{
			off: off, size: rec.size, queueID: rec.queueID, queueOffset: rec.queueOffset, topic: rec.topic,
			tagsCode: tagsCode(rec.topic, &sp), hashFrom: from, hashTo: len(b.hashes), pseq: sp.ProducerSeq,
			delivered: sp.Delivered,
		})
		rb = rb[rec.size:]
		off += int64(rec.size)
	}
	return nil
}
