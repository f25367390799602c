package fsm

import (
	"errors"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/vfs"
)

// diskFull fails every fallocate with ENOSPC while full is set, as a file
// system without room for a new segment does, and counts the failures.
type diskFull struct {
	full   atomic.Bool
	failed atomic.Int64
	waits  atomic.Int64 // OnSpaceWait calls
}

func (d *diskFull) MaybeError(op vfs.Op) error {
	if op.Kind == vfs.OpPreallocate && d.full.Load() {
		d.failed.Add(1)
		return &os.PathError{Op: "fallocate", Path: op.Path, Err: syscall.ENOSPC}
	}
	return nil
}

// newFullDiskFSM is an FSM over a store on a MemFS whose fallocates fail
// while the returned diskFull is full, with topic T created (entry 1).
func newFullDiskFSM(t *testing.T, done <-chan struct{}) (*testFSM, *diskFull) {
	t.Helper()
	disk := &diskFull{}
	mem, cfg := vfs.NewMem(), smallStoreConfig()
	fs := vfs.WithInjector(mem, disk)
	st, err := store.Open(fs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := &testFSM{fs: mem, cfg: cfg}
	f.FSM = New(st, Config{FS: fs, Store: cfg, Done: done, SpaceRetry: time.Millisecond,
		OnFatal: func(err error) { f.fatalErr = err }, OnSpaceWait: func() { disk.waits.Add(1) }})
	t.Cleanup(func() { _ = f.Store().Close() })
	if r := f.Apply(entry(t, 1, Command{Type: CmdCreateTopic, Topic: store.TopicConfig{Name: "T", Queues: 4, Perm: 6}})).(*ApplyResponse); r.Err != nil {
		t.Fatal(r.Err)
	}
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
// store between tries, and is applied once there is room; nothing is
// fatal.
func TestApplyWaitsForSpace(t *testing.T) {
	f, disk := newFullDiskFSM(t, nil)
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
	if r := f.Apply(entry(t, idx+1, batch(int64(idx+1), "T", 50))).(*ApplyResponse); r.Err != nil {
		t.Fatalf("the next entry: %v", r.Err)
	}
	got := len(readQueue(t, f.Store(), "T", 0))
	if want := int(idx) * 13; got != want { // entries 2..idx+1, 13 of each 50 to queue 0
		t.Fatalf("queue 0 holds %d messages, want %d", got, want)
	}
	if s := f.Stats(); s.SpaceWaits != 1 || s.WaitingForSpace || disk.waits.Load() != 1 {
		t.Fatalf("stats %+v, OnSpaceWait called %d times, want one space wait, none now", s, disk.waits.Load())
	}
}

// A node shutting down ends the wait: the entry fails with ErrFatal (it is
// replayed after the restart) and the FSM applies nothing more.
func TestSpaceWaitEndsOnShutdown(t *testing.T) {
	done := make(chan struct{})
	f, disk := newFullDiskFSM(t, done)
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
