package verify

import (
	"errors"
	"fmt"
	"github.com/raftmq/raftmq/meta"
	"io"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"

	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/consumequeue"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/mmap"
	"github.com/raftmq/raftmq/recovery"
	"github.com/raftmq/raftmq/vfs"
)

// ErrFailed is returned (wrapped) by Stores when any check fails.
var ErrFailed = errors.New("verify: a check failed")

// errReadOnly is what Stores' file system answers to any mutation.
var errReadOnly = errors.New("verify: file system is read-only")

// Stores checks the stores in dirs offline (see the package doc) and writes
// a report to w. The error wraps ErrFailed when a check failed.
func Stores(fsys vfs.FS, dirs []string, w io.Writer) error {
	var reps []*verifyReport
	defer func() {
		for _, r := range reps {
			r.close()
		}
	}()
	failed := 0
	for _, dir := range dirs {
		r := verifyDir(fsys, dir, w)
		reps = append(reps, r)
		r.summary()
		if r.errors > 0 {
			failed++
		}
	}
	if len(reps) > 1 && !compareReplicas(reps, w) {
		failed++
	}
	if failed > 0 {
		return fmt.Errorf("%w: %d of %d stores (or their comparison) have errors", ErrFailed, failed, len(dirs))
	}
	return nil
}

// verifyReport collects what one dir's checks found.
type verifyReport struct {
	w        io.Writer
	dir      string // the store dir
	log      *commitlog.Log
	errors   int
	warnings int

	ckpt      *recovery.Checkpoint
	minOffset int64
	end       int64 // end of the last verified entry
	lastIndex uint64
	lastTerm  uint64
	entries   int
	messages  int
	queues    int
	records   []int64                 // start of every verified message record
	queueNext map[meta.QueueKey]int64 // next queue offset per queue, from the commitlog
}

func (r *verifyReport) errorf(format string, args ...any) {
	r.errors++
	fmt.Fprintf(r.w, "%s: error: %s\n", r.dir, fmt.Sprintf(format, args...))
}

func (r *verifyReport) warnf(format string, args ...any) {
	r.warnings++
	fmt.Fprintf(r.w, "%s: warning: %s\n", r.dir, fmt.Sprintf(format, args...))
}

func (r *verifyReport) close() {
	if r.log != nil {
		r.log.Close()
		r.log = nil
	}
}

// confirm is the end of what this replica claims: the checkpoint's
// confirmOffset or the verified end, whichever is larger, clamped to the
// segments present.
func (r *verifyReport) confirm() int64 {
	c := r.end
	if r.ckpt != nil {
		c = max(c, r.ckpt.ConfirmOffset)
	}
	if segs := r.log.Segments(); len(segs) > 0 {
		c = min(c, segs[len(segs)-1].End())
	}
	return c
}

func (r *verifyReport) summary() {
	status := "ok"
	if r.errors > 0 {
		status = "FAILED"
	}
	ck := int64(-1)
	if r.ckpt != nil {
		ck = r.ckpt.ConfirmOffset
	}
	fmt.Fprintf(r.w, "%s: %s min=%d confirm=%d checkpoint=%d last=%d/%d entries=%d messages=%d queues=%d errors=%d warnings=%d\n",
		r.dir, status, r.minOffset, r.end, ck, r.lastIndex, r.lastTerm, r.entries, r.messages, r.queues, r.errors, r.warnings)
}

// resolveStoreDir accepts a data dir (with store/) or a store dir.
func resolveStoreDir(fsys vfs.FS, dir string) (string, error) {
	for _, d := range []string{filepath.Join(dir, "store"), dir} {
		if fi, err := fsys.Stat(filepath.Join(d, recovery.CommitLogDir)); err == nil && fi.IsDir() {
			return d, nil
		}
	}
	return "", fmt.Errorf("no %s directory in %s or %s", recovery.CommitLogDir, dir, filepath.Join(dir, "store"))
}

func verifyDir(fsys vfs.FS, dir string, w io.Writer) *verifyReport {
	r := &verifyReport{w: w, dir: dir, queueNext: map[meta.QueueKey]int64{}}
	sd, err := resolveStoreDir(fsys, dir)
	if err != nil {
		r.errorf("%v", err)
		return r
	}
	r.dir = sd
	ro := readOnlyFS{fsys}
	if !r.openLog(fsys, ro) {
		return r
	}
	r.readCheckpoint(ro)
	r.notes(fsys)
	r.scan()
	r.checkCheckpointEntry()
	r.checkConsumeQueues(fsys)
	return r
}

func (r *verifyReport) notes(fsys vfs.FS) {
	if ok, _ := recovery.AbortExists(fsys, r.dir); ok {
		r.warnf("abort file present: the last run did not shut down cleanly (open runs abnormal recovery)")
	}
	if _, err := fsys.Stat(filepath.Join(r.dir, recovery.RebuildMarker)); err == nil {
		r.warnf("rebuild marker present: consume queues and index will be rebuilt on open")
	}
}

// openLog opens the commitlog through the read-only file system, with the
// segment size taken from the first segment.
func (r *verifyReport) openLog(fsys vfs.FS, ro readOnlyFS) bool {
	cdir := filepath.Join(r.dir, recovery.CommitLogDir)
	names, err := fsys.List(cdir)
	if err != nil {
		r.errorf("list %s: %v", cdir, err)
		return false
	}
	size := int64(0)
	for _, n := range names {
		if isTmpSegment(n) {
			r.warnf("leftover of an interrupted segment create: %s (open deletes it)", filepath.Join(cdir, n))
			continue
		}
		if _, err := mmap.ParseFileName(n); err == nil && size == 0 {
			fi, err := fsys.Stat(filepath.Join(cdir, n))
			if err != nil {
				r.errorf("stat %s: %v", n, err)
				return false
			}
			size = fi.Size()
		}
	}
	log, err := commitlog.Open(ro, commitlog.Config{Dir: cdir, FileSize: size})
	if err != nil {
		r.errorf("open commitlog: %v", err)
		return false
	}
	r.log = log
	r.minOffset = log.MinOffset()
	r.end = r.minOffset
	return true
}

func isTmpSegment(name string) bool {
	base, ok := strings.CutSuffix(name, ".tmp")
	if !ok {
		return false
	}
	_, err := mmap.ParseFileName(base)
	return err == nil
}

func (r *verifyReport) readCheckpoint(ro readOnlyFS) {
	c, err := recovery.ReadCheckpoint(ro, r.dir)
	switch {
	case errors.Is(err, recovery.ErrNoCheckpoint):
		r.warnf("no checkpoint: nothing is claimed durable")
		return
	case err != nil:
		r.errorf("checkpoint: %v (open refuses)", err)
		return
	}
	r.ckpt = &c
	if _, err := meta.Decode(c.Meta); err != nil {
		r.errorf("checkpoint meta: %v (open refuses)", err)
	}
}

// ckptOffset is the checkpoint's confirmOffset (the min offset without one).
func (r *verifyReport) ckptOffset() int64 {
	if r.ckpt == nil {
		return r.minOffset
	}
	return r.ckpt.ConfirmOffset
}

// scan verifies every entry from the oldest segment on.
func (r *verifyReport) scan() {
	sc := commitlog.NewScanner(r.log, r.minOffset)
	sc.CheckBodyCRC()
	for {
		e, err := sc.Next()
		if err != nil {
			r.scanEnd(sc.Pos(), err)
			return
		}
		r.entry(&e)
	}
}

func (r *verifyReport) scanEnd(pos int64, err error) {
	if !errors.Is(err, io.EOF) {
		if pos < r.ckptOffset() {
			r.errorf("commitlog damaged below the checkpoint (confirmOffset %d) at offset %d: %v", r.ckptOffset(), pos, err)
		} else {
			r.warnf("commitlog tail at offset %d is cut by recovery (above the checkpoint, Raft replays it): %v", pos, err)
		}
		return
	}
	if r.end < r.ckptOffset() {
		r.errorf("commitlog ends at %d but the checkpoint claims %d: data missing", r.end, r.ckptOffset())
	}
}

func (r *verifyReport) entry(e *commitlog.Entry) {
	r.entries++
	r.end, r.lastIndex, r.lastTerm = e.End, e.Header.RaftIndex, e.Header.Term
	switch e.Header.Kind {
	case message.KindCommand:
		if topic, ok := meta.DeletedTopic(e.Command); ok {
			for k := range r.queueNext {
				if k.Topic == topic {
					delete(r.queueNext, k)
				}
			}
		}
		if err := meta.New().Apply(e.Command); err != nil {
			r.errorf("command at %d (index %d): %v", e.Start, e.Header.RaftIndex, err)
		}
	case message.KindMessages:
		_ = e.ForEachRecord(func(off int64, rec message.Record) error {
			r.record(off, &rec)
			return nil
		})
	}
}

func (r *verifyReport) record(off int64, rec *message.Record) {
	r.messages++
	r.records = append(r.records, off)
	k := meta.QueueKey{Topic: string(rec.Topic), Queue: rec.QueueID}
	if next, ok := r.queueNext[k]; ok && rec.QueueOffset != next {
		r.errorf("record at %d: %s/%d queue offset %d, expected %d (not contiguous)", off, k.Topic, k.Queue, rec.QueueOffset, next)
	}
	r.queueNext[k] = rec.QueueOffset + 1
}

// checkCheckpointEntry: the entry the checkpoint names ends at its
// confirmOffset with its index and term.
func (r *verifyReport) checkCheckpointEntry() {
	c := r.ckpt
	if c == nil || c.LastEntryOffset < 0 {
		return
	}
	if c.LastEntryOffset < r.minOffset || c.ConfirmOffset > r.end {
		r.errorf("checkpoint entry [%d,%d) is not among the verified entries [%d,%d)", c.LastEntryOffset, c.ConfirmOffset, r.minOffset, r.end)
		return
	}
	sc := commitlog.NewScanner(r.log, c.LastEntryOffset)
	e, err := sc.Next()
	if err == nil && (e.End != c.ConfirmOffset || e.Header.RaftIndex != c.AppliedIndex || e.Header.Term != c.AppliedTerm) {
		err = fmt.Errorf("entry is [%d,%d) index %d term %d, checkpoint says end %d index %d term %d",
			e.Start, e.End, e.Header.RaftIndex, e.Header.Term, c.ConfirmOffset, c.AppliedIndex, c.AppliedTerm)
	}
	if err != nil {
		r.errorf("checkpoint entry at %d: %v", c.LastEntryOffset, err)
	}
}

// checkConsumeQueues opens each queue on an in-memory copy and checks its
// units against the commitlog records.
func (r *verifyReport) checkConsumeQueues(fsys vfs.FS) {
	root := filepath.Join(r.dir, recovery.ConsumeQueueDir)
	topics, err := fsys.List(root)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		r.errorf("list %s: %v", root, err)
		return
	}
	for _, topic := range topics {
		ids, err := fsys.List(filepath.Join(root, topic))
		if err != nil {
			continue // not a directory: consumequeue.Open ignores it too
		}
		for _, id := range ids {
			r.checkQueueDir(fsys, root, topic, id)
		}
	}
}

func (r *verifyReport) checkQueueDir(fsys vfs.FS, root, topic, id string) {
	dir := filepath.Join(root, topic, id)
	mem := vfs.NewMem()
	size, err := copyTree(fsys, mem, dir)
	if err != nil {
		r.errorf("consume queue %s: %v", dir, err)
		return
	}
	if size == 0 {
		size = consumequeue.DefaultFileSize
	}
	cqs, err := consumequeue.Open(mem, consumequeue.Config{Dir: root, FileSize: size})
	if err != nil {
		r.errorf("consume queue %s: %v", dir, err)
		return
	}
	defer cqs.Close()
	for _, q := range cqs.Queues() {
		r.queues++
		r.checkQueue(q)
	}
}

// checkQueue checks every unit of q.
func (r *verifyReport) checkQueue(q *consumequeue.Queue) {
	name := fmt.Sprintf("consume queue %s/%d", q.Topic(), q.QueueID())
	var units []consumequeue.Unit
	prevEnd, above := int64(0), 0
	for off := q.MinOffset(); off < q.MaxOffset(); {
		var err error
		units, err = q.Range(off, 1024, units[:0])
		if err != nil || len(units) == 0 {
			r.errorf("%s: range at %d: %v", name, off, err)
			return
		}
		for _, u := range units {
			switch {
			case u.PhyOffset < prevEnd:
				r.errorf("%s: unit %d at %d overlaps the previous unit", name, off, u.PhyOffset)
			case u.PhyOffset >= r.end:
				above++
			case u.PhyOffset >= r.minOffset:
				r.checkUnit(name, q, off, u)
			}
			prevEnd = u.End()
			off++
		}
	}
	if above > 0 {
		r.warnf("%s: %d units point at or above the verified end %d (recovery cuts them)", name, above, r.end)
	}
	k := meta.QueueKey{Topic: q.Topic(), Queue: q.QueueID()}
	if next, ok := r.queueNext[k]; ok && q.MaxOffset() < next {
		r.warnf("%s: holds %d units, the commitlog %d (open rebuilds the lagging queue)", name, q.MaxOffset(), next)
	}
}

func (r *verifyReport) checkUnit(name string, q *consumequeue.Queue, off int64, u consumequeue.Unit) {
	i := sort.Search(len(r.records), func(i int) bool { return r.records[i] >= u.PhyOffset })
	if i == len(r.records) || r.records[i] != u.PhyOffset {
		r.errorf("%s: unit %d points at %d, which is not a message record", name, off, u.PhyOffset)
		return
	}
	rec, err := r.log.ReadRecord(u.PhyOffset)
	if err != nil {
		r.errorf("%s: unit %d: %v", name, off, err)
		return
	}
	tags, _ := message.GetProperty(rec.Properties, message.PropertyTags)
	if string(rec.Topic) != q.Topic() || rec.QueueID != q.QueueID() || rec.QueueOffset != off ||
		rec.Size != u.Size || message.TagsCodeBytes(tags) != u.TagsCode {
		r.errorf("%s: unit %d {%d %d %d} does not match the record at %d (%s/%d offset %d size %d)",
			name, off, u.PhyOffset, u.Size, u.TagsCode, u.PhyOffset, rec.Topic, rec.QueueID, rec.QueueOffset, rec.Size)
	}
}

// compareReplicas compares the commitlog bytes of the common range.
func compareReplicas(reps []*verifyReport, w io.Writer) bool {
	lo, hi := int64(0), int64(1<<62)
	for _, r := range reps {
		if r.log == nil {
			fmt.Fprintf(w, "compare: skipped, %s could not be opened\n", r.dir)
			return false
		}
		lo, hi = max(lo, r.minOffset), min(hi, r.confirm())
	}
	if lo >= hi {
		fmt.Fprintf(w, "compare: no common range ([%d,%d))\n", lo, hi)
		return true
	}
	for _, r := range reps[1:] {
		if off, ok := firstDiff(reps[0].log, r.log, lo, hi); !ok {
			fmt.Fprintf(w, "compare: error: %s and %s differ at offset %d (%s vs %s)\n",
				reps[0].dir, r.dir, off, segmentPath(reps[0].log, off), segmentPath(r.log, off))
			return false
		}
	}
	fmt.Fprintf(w, "compare: %d replicas identical in [%d,%d)\n", len(reps), lo, hi)
	return true
}

// firstDiff compares a and b over [lo, hi); ok is false at the first
// differing (or missing) byte, returned as off.
func firstDiff(a, b *commitlog.Log, lo, hi int64) (int64, bool) {
	for off := lo; off < hi; {
		ab, bb := segmentBytes(a, off), segmentBytes(b, off)
		n := min(int64(len(ab)), int64(len(bb)), hi-off)
		if n == 0 {
			return off, false
		}
		for i := int64(0); i < n; i++ {
			if ab[i] != bb[i] {
				return off + i, false
			}
		}
		off += n
	}
	return hi, true
}

// segmentBytes is the rest of the segment holding off (nil if none).
func segmentBytes(l *commitlog.Log, off int64) []byte {
	for _, s := range l.Segments() {
		if s.Start <= off && off < s.End() {
			return s.File.Bytes()[off-s.Start:]
		}
	}
	return nil
}

func segmentPath(l *commitlog.Log, off int64) string {
	for _, s := range l.Segments() {
		if s.Start <= off && off < s.End() {
			return s.File.Name()
		}
	}
	return "no segment"
}
