package fsm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/vfs"
)

// diskFull fails every fallocate of a file under one of the store's
// directories (dir; any when empty) with ENOSPC while full is set, as a
// file system without room for a new file does, and counts the failures.
type diskFull struct {
	dir    string
	full   atomic.Bool
	failed atomic.Int64
	waits  atomic.Int64 // OnSpaceWait calls
}

func (d *diskFull) MaybeError(op vfs.Op) error {
	inDir := d.dir == "" || strings.Contains(op.Path, string(filepath.Separator)+d.dir+string(filepath.Separator))
	if op.Kind == vfs.OpPreallocate && inDir && d.full.Load() {
		d.failed.Add(1)
		return &os.PathError{Op: "fallocate", Path: op.Path, Err: syscall.ENOSPC}
	}
	return nil
}

// faultySetup says how newFaultyFSM builds an FSM over a store whose file
// system injects faults.
type faultySetup struct {
	// onDisk: the OS file system under a temporary directory, where the
	// store is really mapped and what it wrote stays in the page cache
	// across a reopen, as in a node; else a MemFS, whose heap twin of a
	// mapping keeps only what the store flushed (as a disk after a power
	// loss).
	onDisk      bool
	inj         vfs.Injector
	adjust      func(*store.Config) // if set, adjusts the store config
	done        <-chan struct{}     // Config.Done; nil: closed after 10 s, bounding every wait
	onSpaceWait func()
	topic       bool // apply entry 1: create topic T
}

// newFaultyFSM builds the FSM of setup; OnFatal records into fatalErr.
func newFaultyFSM(t *testing.T, setup faultySetup) *testFSM {
	t.Helper()
	var fs vfs.FS
	cfg := smallStoreConfig()
	if setup.onDisk {
		cfg.Dir, fs = filepath.Join(t.TempDir(), "store"), vfs.OS()
	} else {
		fs = vfs.NewMem()
	}
	if setup.adjust != nil {
		setup.adjust(&cfg)
	}
	fs = vfs.WithInjector(fs, setup.inj)
	st, err := store.Open(fs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := setup.done
	if done == nil {
		bound := make(chan struct{})
		timer := time.AfterFunc(10*time.Second, func() { close(bound) })
		t.Cleanup(func() { timer.Stop() })
		done = bound
	}
	f := &testFSM{cfg: cfg}
	f.FSM = New(st, Config{FS: fs, Store: cfg, Done: done, SpaceRetry: time.Millisecond,
		OnFatal: func(err error) { f.fatalErr = err }, OnSpaceWait: setup.onSpaceWait})
	t.Cleanup(func() { _ = f.Store().Close() })
	if setup.topic {
		if r := f.Apply(entry(t, 1, Command{Type: CmdCreateTopic, Topic: store.TopicConfig{Name: "T", Queues: 4, Perm: 6}})).(*ApplyResponse); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	return f
}

// newFullDiskFSM is an FSM over a store on disk whose fallocates under dir
// fail while the returned diskFull is full, with topic T created (entry 1).
func newFullDiskFSM(t *testing.T, dir string, done <-chan struct{}) (*testFSM, *diskFull) {
	t.Helper()
	disk := &diskFull{dir: dir}
	f := newFaultyFSM(t, faultySetup{onDisk: true, inj: disk, done: done, topic: true, onSpaceWait: func() { disk.waits.Add(1) }})
	return f, disk
}

// applyUntilWaiting applies batches from index 2 on in a goroutine until one
// waits for space, and returns that entry's index and the channel its
// response comes on.
func applyUntilWaiting(t *testing.T, f *testFSM) (uint64, chan *ApplyResponse) {
	t.Helper()
	out := make(chan *ApplyResponse, 1)
	var current atomic.Uint64
	go func() {
		for i := uint64(2); i < 1000; i++ {
			current.Store(i)
			r := f.Apply(entry(t, i, batch(int64(i), "T", 50))).(*ApplyResponse)
			if f.Stats().SpaceWaits > 0 || r.Err != nil {
				out <- r
				return
			}
		}
		out <- nil
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !f.Stats().WaitingForSpace {
		select {
		case r := <-out:
			t.Fatalf("entries up to %d applied without waiting for space: %v", current.Load(), r)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no entry waited for space within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
	return current.Load(), out
}

// An entry the store cannot apply for lack of space waits, reopening the
// store between tries, and is applied once there is room, with the
// results of its messages' real positions; nothing is fatal. A full
// commitlog refuses the entry before it is written (the reopened store
// applies it again); full consume queues refuse its dispatch after the
// commitlog took it (the reopened store recovered it, the first try's
// results stand).
func TestApplyWaitsForSpace(t *testing.T) {
	for _, dir := range []string{"commitlog", "consumequeue"} {
		t.Run(dir, func(t *testing.T) {
			f, disk := newFullDiskFSM(t, dir, nil)
			before := f.Store()
			disk.full.Store(true)
			idx, out := applyUntilWaiting(t, f)
			deadline := time.Now().Add(10 * time.Second)
			for disk.failed.Load() < 3 { // the first try and two reopened ones
				if time.Now().After(deadline) {
					t.Fatalf("%d failed fallocates, want retries", disk.failed.Load())
				}
				time.Sleep(time.Millisecond)
			}
			disk.full.Store(false)
			r := <-out
			if r.Err != nil || len(r.Results) != 50 {
				t.Fatalf("entry %d after space returned: %+v", idx, r)
			}
			if f.fatalErr != nil {
				t.Fatalf("fatal: %v", f.fatalErr)
			}
			if f.Store() == before {
				t.Fatal("the store that failed for lack of space was not reopened")
			}
			if got, _ := f.Store().Applied(); got != idx {
				t.Fatalf("applied index %d, want %d", got, idx)
			}
			checkResults(t, f.Store(), r.Results, fmt.Sprintf("@%d", idx))
			if r := f.Apply(entry(t, idx+1, batch(int64(idx+1), "T", 50))).(*ApplyResponse); r.Err != nil {
				t.Fatalf("the next entry: %v", r.Err)
			}
			got := len(readQueue(t, f.Store(), "T", 0))
			if want := int(idx) * 13; got != want { // entries 2..idx+1, 13 of each 50 to queue 0
				t.Fatalf("queue 0 holds %d messages, want %d", got, want)
			}
			tries := disk.failed.Load() // one fallocate refused a try
			if s := f.Stats(); s.SpaceWaits != 1 || s.WaitingForSpace || s.Applied != uint64(idx)+1 || disk.waits.Load() < tries {
				t.Fatalf("stats %+v, OnSpaceWait called %d times in %d tries, want one space wait, none now, once a try", s, disk.waits.Load(), tries)
			}
		})
	}
}

// checkResults reads each result's message back at its queue offset: the
// body ends with suffix and the physical offset is the result's.
func checkResults(t *testing.T, st *store.Store, results []store.PutResult, suffix string) {
	t.Helper()
	for i, res := range results {
		got, err := st.GetMessages(res.Topic, res.QueueID, res.QueueOffset, 1, 1<<20, "")
		if err != nil || len(got.Messages) != 1 {
			t.Fatalf("result %d (queue %d offset %d): %v, %d messages", i, res.QueueID, res.QueueOffset, err, len(got.Messages))
		}
		m := got.Messages[0]
		if want := fmt.Sprintf("m%d%s", i, suffix); string(m.Body) != want || m.PhysicalOffset != res.PhysicalOffset {
			t.Fatalf("result %d: %q at %d, want %q at %d", i, m.Body, m.PhysicalOffset, want, res.PhysicalOffset)
		}
	}
}

// A refused command is recorded with a no-op frame; one the full disk
// refuses (the first write of an empty store creates a segment) waits too.
func TestRejectWaitsForSpace(t *testing.T) {
	disk := &diskFull{}
	f := newFaultyFSM(t, faultySetup{onDisk: true, inj: disk})
	disk.full.Store(true)
	out := make(chan *ApplyResponse, 1)
	go func() {
		out <- f.Apply(&raft.Log{Index: 1, Term: 1, Type: raft.LogCommand, Data: []byte{1, 99, 0}}).(*ApplyResponse)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for disk.failed.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d failed fallocates, want the refusal's no-op frame to wait (stats %+v)", disk.failed.Load(), f.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	disk.full.Store(false)
	r := <-out
	if !errors.Is(r.Err, ErrUnknownCommand) || f.fatalErr != nil {
		t.Fatalf("malformed entry after space: %v (fatal %v), want ErrUnknownCommand", r.Err, f.fatalErr)
	}
	if got, _ := f.Store().Applied(); got != 1 {
		t.Fatalf("applied index %d, want 1", got)
	}
	if s := f.Stats(); s.Rejected != 1 || s.SpaceWaits != 1 {
		t.Fatalf("stats %+v, want one rejected entry after one space wait", s)
	}
}

// A reopened store that lost applied entries (the heap twin of MemFS keeps
// only what was flushed, as a disk after a power loss) would take the
// entry with a gap below it: fatal instead.
func TestSpaceWaitStopsWhenReopenLostEntries(t *testing.T) {
	disk := &diskFull{}
	f := newFaultyFSM(t, faultySetup{inj: disk, topic: true}) // the 10 s bound ends a wait that never would without the check
	disk.full.Store(true)
	var r *ApplyResponse
	for i := uint64(2); i < 1000 && f.Stats().SpaceWaits == 0; i++ {
		r = f.Apply(entry(t, i, batch(int64(i), "T", 50))).(*ApplyResponse)
	}
	if !errors.Is(r.Err, ErrFatal) || !strings.Contains(r.Err.Error(), "below the 1 it had applied") || f.fatalErr == nil {
		t.Fatalf("entry after a reopen that lost entry 1: %v (fatal %v), want ErrFatal for the gap", r.Err, f.fatalErr)
	}
}

// A node shutting down ends the wait: the entry fails with ErrFatal (it is
// replayed after the restart) and the FSM applies nothing more.
func TestSpaceWaitEndsOnShutdown(t *testing.T) {
	done := make(chan struct{})
	f, disk := newFullDiskFSM(t, "", done)
	disk.full.Store(true)
	idx, out := applyUntilWaiting(t, f)
	close(done)
	r := <-out
	if !errors.Is(r.Err, ErrFatal) || !errors.Is(r.Err, syscall.ENOSPC) || !errors.Is(f.fatalErr, ErrFatal) {
		t.Fatalf("entry %d at shutdown: %v (OnFatal %v), want ErrFatal wrapping ENOSPC", idx, r.Err, f.fatalErr)
	}
	disk.full.Store(false)
	if r := f.Apply(entry(t, idx+1, batch(int64(idx+1), "T", 1))).(*ApplyResponse); !errors.Is(r.Err, ErrFatal) {
		t.Fatalf("an entry after the fatal one: %v, want ErrFatal", r.Err)
	}
}

// syncNoSpace fails every sync with ENOSPC while on is set.
type syncNoSpace struct{ on atomic.Bool }

func (s *syncNoSpace) MaybeError(op vfs.Op) error {
	if op.Kind == vfs.OpSync && s.on.Load() {
		return &os.PathError{Op: "fdatasync", Path: op.Path, Err: syscall.ENOSPC}
	}
	return nil
}

// A sync that fails for lack of space is not waited out: the pages it
// covered may be gone from the disk while the page cache shows them, so
// the next entry is fatal (the node restarts and recovers from disk).
func TestFailedSyncForNoSpaceIsFatal(t *testing.T) {
	inj := &syncNoSpace{}
	f := newFaultyFSM(t, faultySetup{inj: inj, topic: true}) // the 10 s bound ends a wait the FSM must not start
	inj.on.Store(true)
	if err := f.Store().Flush(); !errors.Is(err, store.ErrSyncFailed) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("flush with syncs failing: %v, want ErrSyncFailed wrapping ENOSPC", err)
	}
	inj.on.Store(false)
	r := f.Apply(entry(t, 2, batch(2, "T", 5))).(*ApplyResponse)
	if !errors.Is(r.Err, ErrFatal) || !errors.Is(r.Err, store.ErrSyncFailed) || f.fatalErr == nil {
		t.Fatalf("entry after a failed sync: %v (fatal %v), want ErrFatal", r.Err, f.fatalErr)
	}
	if s := f.Stats(); s.SpaceWaits != 0 {
		t.Fatalf("stats %+v: a failed sync was waited out", s)
	}
}

// freedByRetention fails fallocates of new commitlog segments with ENOSPC
// from when full is set until a commitlog segment (not a .tmp file a
// failed roll left) is removed.
type freedByRetention struct {
	full   atomic.Bool
	failed atomic.Int64
}

func (d *freedByRetention) MaybeError(op vfs.Op) error {
	inLog := strings.Contains(op.Path, string(filepath.Separator)+"commitlog"+string(filepath.Separator))
	switch {
	case op.Kind == vfs.OpRemove && inLog && !strings.HasSuffix(op.Path, ".tmp"): // a segment, not a failed roll's leftover
		d.full.Store(false)
	case op.Kind == vfs.OpPreallocate && inLog && d.full.Load():
		d.failed.Add(1)
		return &os.PathError{Op: "fallocate", Path: op.Path, Err: syscall.ENOSPC}
	}
	return nil
}

// The store's own retention runs every CleanInterval, on a store the wait
// reopens more often than that: the wait runs a pass before each try, and
// a retention that frees space ends it with no one's help.
func TestRetentionEndsSpaceWait(t *testing.T) {
	disk := &freedByRetention{}
	f := newFaultyFSM(t, faultySetup{onDisk: true, inj: disk, topic: true, // the 10 s bound ends a wait that never would without retention
		adjust: func(c *store.Config) { c.DiskMaxUsedSpaceRatio = 1 }}) // every segment below the checkpoint may go
	cfg := f.cfg
	i := uint64(2)
	for ; f.Store().Stats().MaxOffset < 3*cfg.CommitLogFileSize; i++ {
		if r := f.Apply(entry(t, i, batch(int64(i), "T", 50))).(*ApplyResponse); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if err := f.Store().Flush(); err != nil {
		t.Fatal(err)
	}
	disk.full.Store(true)
	for ; f.Stats().SpaceWaits == 0; i++ {
		if i > 1000 {
			t.Fatal("1000 entries and no wait for space")
		}
		r := f.Apply(entry(t, i, batch(int64(i), "T", 50))).(*ApplyResponse)
		if r.Err != nil || f.fatalErr != nil {
			t.Fatalf("entry %d: %v (fatal %v, %d fallocates refused), want it applied after retention freed space", i, r.Err, f.fatalErr, disk.failed.Load())
		}
		if f.Stats().SpaceWaits > 0 {
			checkResults(t, f.Store(), r.Results, fmt.Sprintf("@%d", i))
		}
	}
	if s := f.Store().Stats(); s.SegmentsDeleted == 0 || disk.failed.Load() == 0 {
		t.Fatalf("store stats %+v, %d fallocates refused: want a refused one and deleted segments", s, disk.failed.Load())
	}
}
