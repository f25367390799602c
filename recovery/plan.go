package recovery

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/raftmq/raftmq/commitlog"
)

// Mode says which recovery the store runs.
type Mode int

const (
	// Fresh: no commitlog and no checkpoint.
	Fresh Mode = iota
	// Normal: the last run shut down cleanly (no abort file).
	Normal
	// Abnormal: the abort file was found: crash, kill -9 or power loss.
	Abnormal
)

func (m Mode) String() string {
	switch m {
	case Fresh:
		return "fresh"
	case Normal:
		return "normal"
	default:
		return "abnormal"
	}
}

// Tail says how the scan after the checkpoint ended.
type Tail int

const (
	TailClean   Tail = iota // zeros or the end of the last segment
	TailTorn                // an interrupted write: cut it
	TailCorrupt             // damage above the checkpoint: cut it, loudly
)

func (t Tail) String() string {
	return [...]string{"clean", "torn", "corrupt"}[t]
}

var (
	// ErrDataMissing: commitlog bytes the checkpoint claims durable are gone.
	ErrDataMissing = errors.New("recovery: data missing below the checkpoint")
	// ErrCorruptBelowCheckpoint: bytes the checkpoint claims durable fail
	// verification. The store does not open; re-sync from the leader.
	ErrCorruptBelowCheckpoint = errors.New("recovery: corrupt data below the checkpoint")
)

// Error names the file and offset of a refusal.
type Error struct {
	File   string
	Offset int64
	Reason string
	Err    error // ErrDataMissing, ErrCorruptBelowCheckpoint or ErrCheckpointCorrupt
}

func (e *Error) Error() string {
	return fmt.Sprintf("recovery: %s at offset %d in %s: %v", e.Reason, e.Offset, e.File, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Entry describes the last complete, verified entry.
type Entry struct {
	Offset         int64 // start (-1: none)
	End            int64
	RaftIndex      uint64
	Term           uint64
	StoreTimestamp int64
}

// Plan is what recovery decided from the files; the store applies it.
type Plan struct {
	Mode          Mode
	HasCheckpoint bool
	Checkpoint    Checkpoint
	// ScanFrom: where verification (and redispatch) of the tail starts.
	ScanFrom int64
	// ConfirmOffset: end of the last complete, verified entry; everything at
	// and above it is cut from commitlog, consume queues and index.
	ConfirmOffset int64
	Last          Entry
	Tail          Tail
	TailErr       error // why the scan stopped, when Tail != TailClean
	Entries       int   // entries verified after ScanFrom
	Bytes         int64 // bytes verified after ScanFrom
	Duration      time.Duration
}

// Compute reads the commitlog and checkpoint and decides; it changes nothing.
// ckpt is nil when no checkpoint exists. It is Begin followed by ScanTail.
func Compute(log *commitlog.Log, ckpt *Checkpoint, abort bool, logger hclog.Logger) (Plan, error) {
	p, err := Begin(log, ckpt, abort)
	if err != nil {
		return p, err
	}
	return p, p.ScanTail(log, logger, nil)
}

// Begin is the first half of Compute: it checks what the checkpoint claims
// against the commitlog (the refusals) and fixes ScanFrom, which is all a
// caller needs to prepare the derived files; ConfirmOffset and Last are
// still the checkpoint's until ScanTail. It changes nothing.
func Begin(log *commitlog.Log, ckpt *Checkpoint, abort bool) (Plan, error) {
	started := time.Now()
	p := Plan{Mode: Normal, Last: Entry{Offset: -1}}
	if abort {
		p.Mode = Abnormal
	}
	if ckpt != nil {
		p.HasCheckpoint, p.Checkpoint = true, *ckpt
	}
	if err := p.checkBelowCheckpoint(log); err != nil {
		return p, err
	}
	if ckpt == nil && log.WriteOffset() == log.MinOffset() && len(log.Segments()) == 0 {
		p.Mode = Fresh
	}
	p.Duration = time.Since(started)
	return p, nil
}

// ErrStopped is what ScanTail returns when its each callback stopped it.
var ErrStopped = errors.New("recovery: scan stopped by its consumer")

// ScanTail is the second half of Compute: it verifies every entry from
// ScanFrom and sets ConfirmOffset, Last, Tail, Entries and Bytes. If each is
// not nil it is called, in log order, with every entry that ends up below
// the final ConfirmOffset, as soon as it is verified: an entry is passed on
// only once nothing can cut it any more (the scan stops at the first entry
// that fails, and everything before it stays). e aliases the mapping and is
// valid while the log's segments stay mapped. An error from each stops the
// scan and is returned (wrapped with ErrStopped); the plan is then
// incomplete. ScanTail itself changes nothing.
func (p *Plan) ScanTail(log *commitlog.Log, logger hclog.Logger, each func(e *commitlog.Entry) error) error {
	started := time.Now()
	err := p.scanTail(log, logger, each)
	p.Duration += time.Since(started)
	return err
}

// checkBelowCheckpoint verifies that the bytes the checkpoint claims exist
// and that the entry ending at confirmOffset is intact.
func (p *Plan) checkBelowCheckpoint(log *commitlog.Log) error {
	if !p.HasCheckpoint {
		p.ScanFrom = log.MinOffset()
		p.ConfirmOffset = p.ScanFrom
		return nil
	}
	c := p.Checkpoint
	p.ScanFrom = c.ConfirmOffset
	p.ConfirmOffset = c.ConfirmOffset
	p.Last = Entry{Offset: c.LastEntryOffset, End: c.ConfirmOffset, RaftIndex: c.AppliedIndex, Term: c.AppliedTerm, StoreTimestamp: c.StoreTimestamp}
	if c.LastEntryOffset < 0 {
		if c.ConfirmOffset > 0 && log.MinOffset() > c.ConfirmOffset {
			return &Error{File: "commitlog", Offset: c.ConfirmOffset, Reason: "commitlog starts after the checkpoint", Err: ErrDataMissing}
		}
		return nil
	}
	if log.MinOffset() > c.LastEntryOffset || log.WriteOffset() < c.ConfirmOffset {
		return &Error{File: "commitlog", Offset: c.LastEntryOffset,
			Reason: fmt.Sprintf("checkpoint claims [%d,%d) but the commitlog holds [%d,%d)", c.LastEntryOffset, c.ConfirmOffset, log.MinOffset(), log.WriteOffset()),
			Err:    ErrDataMissing}
	}
	sc := commitlog.NewScanner(log, c.LastEntryOffset)
	e, err := sc.Next()
	if err == nil && (e.End != c.ConfirmOffset || e.Header.RaftIndex != c.AppliedIndex || e.Header.Term != c.AppliedTerm) {
		err = fmt.Errorf("entry at the checkpoint is [%d,%d) index %d term %d, checkpoint says end %d index %d term %d",
			e.Start, e.End, e.Header.RaftIndex, e.Header.Term, c.ConfirmOffset, c.AppliedIndex, c.AppliedTerm)
	}
	if err != nil {
		return &Error{File: segmentName(log, c.LastEntryOffset), Offset: c.LastEntryOffset, Reason: err.Error(), Err: ErrCorruptBelowCheckpoint}
	}
	return nil
}

// scanTail verifies every entry from ScanFrom and finds confirmOffset.
func (p *Plan) scanTail(log *commitlog.Log, logger hclog.Logger, each func(e *commitlog.Entry) error) error {
	if p.ScanFrom >= log.WriteOffset() {
		return nil
	}
	sc := commitlog.NewScanner(log, p.ScanFrom)
	started := time.Now()
	lastReport := started
	for {
		e, err := sc.Next()
		if errors.Is(err, commitlog.ErrRead) {
			return fmt.Errorf("recovery: scan: %w", err) // an I/O error says nothing about the bytes: cut nothing
		}
		if err != nil {
			p.classifyEnd(err)
			if p.Tail != TailClean {
				logger.Warn("commitlog tail cut", "tail", p.Tail.String(), "offset", p.ConfirmOffset, "file", segmentName(log, p.ConfirmOffset), "reason", err)
			}
			return nil
		}
		if p.Last.Offset >= 0 && e.Header.RaftIndex <= p.Last.RaftIndex {
			p.Tail, p.TailErr = TailCorrupt, fmt.Errorf("raft index %d after %d", e.Header.RaftIndex, p.Last.RaftIndex)
			logger.Warn("commitlog tail cut", "tail", "corrupt", "offset", e.Start, "reason", p.TailErr)
			return nil
		}
		if each != nil {
			if err := each(&e); err != nil {
				return fmt.Errorf("%w at %d: %w", ErrStopped, e.Start, err)
			}
		}
		p.Last = Entry{Offset: e.Start, End: e.End, RaftIndex: e.Header.RaftIndex, Term: e.Header.Term, StoreTimestamp: e.Header.StoreTimestamp}
		p.ConfirmOffset = e.End
		p.Entries++
		p.Bytes += e.End - e.Start
		if p.Entries%1024 == 0 && time.Since(lastReport) > time.Second {
			lastReport = time.Now()
			logger.Info("recovery progress", "file", segmentName(log, e.End), "offset", e.End, "entries", p.Entries,
				"MB/s", float64(p.Bytes)/time.Since(started).Seconds()/1e6)
		}
	}
}

func (p *Plan) classifyEnd(err error) {
	switch {
	case errors.Is(err, io.EOF):
		p.Tail = TailClean
	case errors.Is(err, commitlog.ErrTornTail):
		p.Tail, p.TailErr = TailTorn, err
	default:
		p.Tail, p.TailErr = TailCorrupt, err
	}
}

func segmentName(log *commitlog.Log, off int64) string {
	for _, s := range log.Segments() {
		if s.Start <= off && off < s.End() {
			return s.File.Name()
		}
	}
	return fmt.Sprintf("commitlog@%d", off)
}
