package consumequeue

import (
	"fmt"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/raftmq/raftmq/mmap"
	"github.com/raftmq/raftmq/vfs"
)

// Queue is one consume queue (topic, queue id): an array of units indexed by
// queue offset, stored in a mmap.Queue. One goroutine writes (Put, the
// maintenance calls); any number may read concurrently.
type Queue struct {
	topic string
	id    int32
	dir   string
	fs    vfs.FS
	cfg   mmap.QueueConfig
	log   hclog.Logger

	mu        sync.RWMutex
	mq        *mmap.Queue
	minOffset int64 // first readable queue offset (fillers and expired units skipped)
	maxOffset int64 // next queue offset to write
	maxPhy    int64 // end of the last real unit; 0 if none
	closed    bool
}

// openQueue opens and recovers a queue, whose durable units are known
// durable and valid (Config.Durable).
func openQueue(fs vfs.FS, dir, topic string, id int32, fileSize int64, durable durableUnits, log hclog.Logger) (*Queue, error) {
	// Random: units are 20 bytes, so readahead around a fault would zero-fill
	// megabytes of a fresh file to write a few units.
	cfg := mmap.QueueConfig{Dir: dir, FileSize: fileSize, Random: true, Logger: log}
	mq, err := mmap.OpenQueue(fs, cfg)
	if err != nil {
		return nil, fmt.Errorf("consumequeue: open %s: %w", dir, err)
	}
	q := &Queue{topic: topic, id: id, dir: dir, fs: fs, cfg: cfg, log: log, mq: mq}
	if err := q.recover(durable); err != nil {
		_ = mq.Close()
		return nil, err
	}
	return q, nil
}

// Topic is the queue's topic.
func (q *Queue) Topic() string { return q.topic }

// QueueID is the queue's id within its topic.
func (q *Queue) QueueID() int32 { return q.id }

// MinOffset is the first queue offset that can be read.
func (q *Queue) MinOffset() int64 {
	q.mu.RLock()
	defer q.mu.RUnlock()
	return q.minOffset
}

// MaxOffset is the next queue offset to write (one past the last unit).
func (q *Queue) MaxOffset() int64 {
	q.mu.RLock()
	defer q.mu.RUnlock()
	return q.maxOffset
}

// MaxPhyOffset is the commitlog end offset of the last unit (0 if none).
func (q *Queue) MaxPhyOffset() int64 {
	q.mu.RLock()
	defer q.mu.RUnlock()
	return q.maxPhy
}

// FlushedOffset is the queue offset below which every unit is durable.
func (q *Queue) FlushedOffset() int64 {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		return 0
	}
	return q.mq.FlushedOffset() / UnitSize
}

// Put stores u at queueOffset. It is idempotent: a unit that ends at or
// below MaxPhyOffset, or whose queueOffset is below MaxOffset, was built
// already and is skipped (nil). A queueOffset above MaxOffset is refused with
// ErrGap and nothing is written, except for a queue that holds no unit yet,
// which starts there (filling the start of its first file with fillers).
func (q *Queue) Put(queueOffset int64, u Unit) error {
	if queueOffset < 0 {
		return fmt.Errorf("%w: %d", ErrOffset, queueOffset)
	}
	if !u.Valid() || u.IsFiller() {
		return fmt.Errorf("%w: %+v", ErrBadUnit, u)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return ErrClosed
	}
	if u.End() <= q.maxPhy || queueOffset < q.maxOffset {
		return nil
	}
	if u.PhyOffset < q.maxPhy {
		return fmt.Errorf("%w: offset %d overlaps the previous unit ending at %d", ErrBadUnit, u.PhyOffset, q.maxPhy)
	}
	if queueOffset > q.maxOffset {
		if !q.emptyLocked() {
			return fmt.Errorf("%w: %s-%d: put at %d, next is %d", ErrGap, q.topic, q.id, queueOffset, q.maxOffset)
		}
		if err := q.restartAt(queueOffset); err != nil {
			return err
		}
	}
	return q.appendLocked(u)
}

// emptyLocked: no unit (real or filler) was ever written to the files.
func (q *Queue) emptyLocked() bool {
	return q.mq.Empty() || q.mq.WriteOffset() == q.mq.MinOffset()
}

// restartAt drops any (empty) files and starts the queue at off: its first
// file begins at the file boundary at or below off, with fillers before off.
func (q *Queue) restartAt(off int64) error {
	if !q.mq.Empty() {
		if err := q.resetFiles(); err != nil {
			return err
		}
	}
	pos := off * UnitSize
	start := pos - pos%q.cfg.FileSize
	seg, err := q.mq.Create(start)
	if err != nil {
		return fmt.Errorf("consumequeue: %s-%d: create: %w", q.topic, q.id, err)
	}
	b := seg.File.Bytes()
	for p := int64(0); p < pos-start; p += UnitSize {
		Filler.Encode(b[p:])
	}
	q.mq.SetWriteOffset(pos)
	q.minOffset, q.maxOffset, q.maxPhy = off, off, 0
	return nil
}

// resetFiles removes every file of the queue and reopens it empty.
func (q *Queue) resetFiles() error {
	if err := q.mq.Close(); err != nil {
		return fmt.Errorf("consumequeue: %s-%d: close: %w", q.topic, q.id, err)
	}
	if err := q.fs.RemoveAll(q.dir); err != nil {
		return fmt.Errorf("consumequeue: %s-%d: remove: %w", q.topic, q.id, err)
	}
	mq, err := mmap.OpenQueue(q.fs, q.cfg)
	if err != nil {
		return fmt.Errorf("consumequeue: %s-%d: reopen: %w", q.topic, q.id, err)
	}
	q.mq = mq
	return nil
}

// appendLocked writes u at maxOffset, creating the next file if needed.
func (q *Queue) appendLocked(u Unit) error {
	pos := q.maxOffset * UnitSize
	seg, ok := q.mq.Find(pos)
	if !ok {
		var err error
		if seg, err = q.mq.Create(pos - pos%q.cfg.FileSize); err != nil {
			return fmt.Errorf("consumequeue: %s-%d: create file at %d: %w", q.topic, q.id, pos, err)
		}
	}
	u.Encode(seg.File.Bytes()[pos-seg.Start:])
	q.mq.SetWriteOffset(pos + UnitSize)
	q.maxOffset++
	q.maxPhy = u.End()
	if q.minOffset > q.maxOffset-1 {
		q.minOffset = q.maxOffset - 1
	}
	return nil
}

// Get returns the unit at queueOffset; ErrOffset outside [MinOffset, MaxOffset).
func (q *Queue) Get(queueOffset int64) (Unit, error) {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		return Unit{}, ErrClosed
	}
	if queueOffset < q.minOffset || queueOffset >= q.maxOffset {
		return Unit{}, fmt.Errorf("%w: %d not in [%d, %d)", ErrOffset, queueOffset, q.minOffset, q.maxOffset)
	}
	u, ok := q.unitAt(queueOffset)
	if !ok {
		return Unit{}, q.missingFile(queueOffset)
	}
	return u, nil
}

// unitAt reads the unit at off; ok is false when no file holds it (a
// corrupt queue: every offset in [MinOffset, MaxOffset) has a file).
func (q *Queue) unitAt(off int64) (u Unit, ok bool) {
	pos := off * UnitSize
	seg, ok := q.mq.Find(pos)
	if !ok {
		return Unit{}, false
	}
	return decodeUnit(seg.File.Bytes()[pos-seg.Start:]), true
}

// unitOrFiller is unitAt for the queue's own maintenance, which treats a
// unit no file holds as a filler (it points at nothing).
func (q *Queue) unitOrFiller(off int64) Unit {
	if u, ok := q.unitAt(off); ok {
		return u
	}
	return Filler
}

func (q *Queue) missingFile(off int64) error {
	return fmt.Errorf("%w: %s-%d: offset %d below MaxOffset %d has no file", ErrCorrupt, q.topic, q.id, off, q.maxOffset)
}

// Range appends to dst up to max units starting at from and returns it. from
// must lie in [MinOffset, MaxOffset] (ErrOffset otherwise); at MaxOffset, or
// with max <= 0, the result is dst unchanged.
func (q *Queue) Range(from int64, max int, dst []Unit) ([]Unit, error) {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		return dst, ErrClosed
	}
	if from < q.minOffset || from > q.maxOffset {
		return dst, fmt.Errorf("%w: %d not in [%d, %d]", ErrOffset, from, q.minOffset, q.maxOffset)
	}
	end := q.maxOffset
	if max < 0 {
		max = 0
	}
	if int64(max) < end-from {
		end = from + int64(max)
	}
	for off := from; off < end; {
		seg, ok := q.mq.Find(off * UnitSize)
		if !ok {
			return dst, q.missingFile(off)
		}
		b := seg.File.Bytes()
		for ; off < end && off*UnitSize < seg.End(); off++ {
			dst = append(dst, decodeUnit(b[off*UnitSize-seg.Start:]))
		}
	}
	return dst, nil
}

// Flush makes every written unit durable.
func (q *Queue) Flush() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil
	}
	if err := q.mq.Flush(q.mq.WriteOffset()); err != nil {
		return fmt.Errorf("consumequeue: %s-%d: flush: %w", q.topic, q.id, err)
	}
	return nil
}

// Unflush makes the next Flush sync every unit the queue holds, not only
// those written since the last Flush. Recovery calls it before it repairs a
// lagging queue below its checkpoint: units already there may come from an
// earlier process that wrote them and was killed before it synced them,
// and Open counts what it finds as flushed. (A rebuild after a snapshot
// install truncates its queues instead.)
func (q *Queue) Unflush() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	q.mq.Unflush(q.mq.MinOffset())
}

// close closes the files; the queue is unusable afterwards.
func (q *Queue) close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil
	}
	q.closed = true
	return q.mq.Close()
}
