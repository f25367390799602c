package recovery

import (
	"fmt"

	"github.com/hashicorp/go-hclog"
	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/consumequeue"
	"github.com/raftmq/raftmq/index"
	"github.com/raftmq/raftmq/meta"
)

// Target is the state a replay rebuilds from the commitlog: the metadata,
// the consume queues and the index. The store owns it and implements
// Target; recovery writes it only while the store opens, before anything
// reads it, so nothing here locks.
type Target interface {
	// Meta is the topic and offset metadata command frames and message
	// records are applied to.
	Meta() *meta.Meta
	// DefaultQueues is the queue count of a topic a message record creates
	// (as the apply path creates it).
	DefaultQueues() int32
	// ConsumeQueues are the consume queues.
	ConsumeQueues() *consumequeue.Store
	// Index is the message index.
	Index() *index.Service
}

// Scope says what a replay does with each entry.
type Scope struct {
	// DispatchOnly: rebuild consume queues and index only; the metadata
	// already reflects these entries (lag repair, snapshot install).
	DispatchOnly bool
	// Queues, if not nil, restricts dispatch to these queues.
	Queues map[meta.QueueKey]bool
	// IndexOnly (with DispatchOnly): the index alone, every record as the
	// apply path indexed it, whether or not its topic still exists.
	IndexOnly bool
}

func (r Scope) wants(k meta.QueueKey) bool { return r.Queues == nil || r.Queues[k] }

// Replay replays verified commitlog entries into a Target: command frames
// onto the metadata, message records into consume queues, index and queue
// table. Puts are idempotent, so what the files already hold is skipped.
type Replay struct {
	Log    *commitlog.Log
	Logger hclog.Logger
	Target Target
	// Replayed counts the entries replayed so far.
	Replayed int
}

// Range replays the verified entries in [from, to). The scan (verify) and
// the replay run as a pipeline (see runPipeline).
func (r *Replay) Range(from, to int64, scope Scope) error {
	return r.scanRange(from, to, scope, false)
}

// scanRange is Range, with a commitlog.Scanner's Sparse scan if sparse.
func (r *Replay) scanRange(from, to int64, scope Scope, sparse bool) error {
	if from >= to {
		return nil
	}
	scan := func(send func(*commitlog.Entry) error) error {
		sc := commitlog.NewScanner(r.Log, from)
		if sparse {
			sc.Sparse()
		}
		for {
			e, err := sc.Next()
			if err != nil {
				return fmt.Errorf("recovery: replay at %d: %w", sc.Pos(), err)
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
	return r.runPipeline(scan, scope)
}

// Tail verifies the commitlog tail above the checkpoint (p.ScanTail sets
// confirmOffset) and replays every verified entry, which by ScanTail's
// contract all lie below the final confirmOffset.
func (r *Replay) Tail(p *Plan) error {
	return r.runPipeline(func(send func(*commitlog.Entry) error) error {
		return p.ScanTail(r.Log, r.Logger, send)
	}, Scope{})
}

// CutToCheckpoint trusts consume queues, index and metadata only up to the
// checkpoint (p.ScanFrom): what lies above it may be torn or stale and is
// rebuilt from the verified commitlog tail. It returns the checkpoint's
// metadata, which the Target must return from Meta from then on.
func CutToCheckpoint(p *Plan, cqs *consumequeue.Store, idx *index.Service) (*meta.Meta, error) {
	for _, q := range cqs.Queues() {
		if err := q.TruncateAtPhy(p.ScanFrom); err != nil {
			return nil, fmt.Errorf("recovery: truncate consume queue %s/%d: %w", q.Topic(), q.QueueID(), err)
		}
	}
	if err := recoverIndex(p, idx); err != nil {
		return nil, err
	}
	m, err := meta.Decode(p.Checkpoint.Meta)
	if err != nil {
		return nil, &Error{File: CheckpointName, Reason: "meta: " + err.Error(), Err: ErrCheckpointCorrupt}
	}
	return m, truncateQueuesToMeta(cqs, m)
}

// truncateQueuesToMeta cuts every consume queue to the unit count the
// checkpoint's queue table records: a damaged unit above the checkpoint can
// hold a plausible but wrong PhyOffset that TruncateAtPhy would keep.
func truncateQueuesToMeta(cqs *consumequeue.Store, m *meta.Meta) error {
	for _, q := range cqs.Queues() {
		next := m.Queues[meta.QueueKey{Topic: q.Topic(), Queue: q.QueueID()}]
		if err := q.TruncateAtOffset(next); err != nil {
			return fmt.Errorf("recovery: truncate consume queue %s/%d: %w", q.Topic(), q.QueueID(), err)
		}
	}
	return nil
}

// recoverIndex cuts the index back to what the checkpoint proves durable
// (abnormal exit: the newest file may hold slots pointing at lost entries),
// or to confirmOffset after a clean exit.
func recoverIndex(p *Plan, idx *index.Service) error {
	if p.Mode == Abnormal || !p.HasCheckpoint {
		var st index.State
		if p.HasCheckpoint {
			st = p.Checkpoint.Index.State
		}
		if err := idx.RecoverTo(st); err != nil {
			return fmt.Errorf("recovery: recover index: %w", err)
		}
	}
	return idx.TruncateAbove(p.ScanFrom)
}

// Reindex re-indexes the entries between the checkpoint's index state and
// its confirm offset: the periodic flush msyncs the index only every
// IndexFlushInterval, so after a crash the durable index may cover less
// than the commitlog (re-indexing is idempotent). The checkpoint proved
// those bytes durable, so the scan is sparse (commitlog.Scanner.Sparse):
// after seconds of large messages it reads their heads and properties, not
// gigabytes of bodies (from the disk, when they left the page cache).
func (r *Replay) Reindex(p *Plan) error {
	if !p.HasCheckpoint {
		return nil
	}
	from := max(p.Checkpoint.Index.ConfirmOffset, r.Log.MinOffset())
	if from >= p.ScanFrom {
		return nil
	}
	r.Logger.Info("re-indexing below the checkpoint", "from", from, "to", p.ScanFrom)
	return r.scanRange(from, p.ScanFrom, Scope{DispatchOnly: true, IndexOnly: true}, true)
}

// Lagging returns the queues whose consume queue holds fewer units than the
// queue table says were written (a lost or deleted consume-queue file).
func (r *Replay) Lagging() map[meta.QueueKey]bool {
	cqs := r.Target.ConsumeQueues()
	lagging := map[meta.QueueKey]bool{}
	for k, next := range r.Target.Meta().Queues {
		q := cqs.Get(k.Topic, k.Queue)
		if q == nil || q.MaxOffset() < next {
			lagging[k] = true
		}
	}
	return lagging
}

// RepairLagging rebuilds the lagging queues (see Lagging) from the
// commitlog start up to scanFrom. The caller makes the repair durable or
// redoable: its units are unsynced until the next flush, so a power loss
// before it can leave holes in older files that the next start's checks
// (which see only the newest files) take for units; the store leaves the
// rebuild marker first, so that start rebuilds every queue instead.
func (r *Replay) RepairLagging(lagging map[meta.QueueKey]bool, scanFrom int64) error {
	if len(lagging) == 0 {
		return nil
	}
	r.Logger.Warn("rebuilding lagging consume queues from the commitlog", "queues", len(lagging), "from", r.Log.MinOffset())
	cqs := r.Target.ConsumeQueues()
	for k := range lagging {
		if q := cqs.Get(k.Topic, k.Queue); q != nil {
			q.Unflush() // the flush after the repair syncs every unit
		}
	}
	return r.Range(r.Log.MinOffset(), scanFrom, Scope{DispatchOnly: true, Queues: lagging})
}

// RebuildAll rebuilds consume queues and index from the commitlog start up
// to scanFrom (after a snapshot install).
func (r *Replay) RebuildAll(scanFrom int64) error {
	r.Logger.Info("rebuilding consume queues and index after a snapshot install", "from", r.Log.MinOffset(), "to", scanFrom)
	// Whatever the queues hold was written by a rebuild cut short (the
	// install leaves no queue files, and the marker goes only with the
	// first checkpoint after a rebuild), so none of it was ever synced:
	// after a kill -9 it is intact but unsynced, after a power loss pages
	// of it read as zeros or are torn at sectors. Queue recovery checks only
	// the newest files, and the replay skips units below MaxOffset, so
	// start every queue over (this also lowers FlushedOffset: the flush
	// after the rebuild syncs every unit).
	for _, q := range r.Target.ConsumeQueues().Queues() {
		if err := q.TruncateAtOffset(0); err != nil {
			return fmt.Errorf("recovery: reset consume queue %s/%d for the rebuild: %w", q.Topic(), q.QueueID(), err)
		}
	}
	// Its index files too, and without an abort file (the install wrote
	// none) Open trusted them: start the index over.
	if err := r.Target.Index().RecoverTo(index.State{}); err != nil {
		return fmt.Errorf("recovery: reset the index for the rebuild: %w", err)
	}
	return r.Range(r.Log.MinOffset(), scanFrom, Scope{DispatchOnly: true})
}
