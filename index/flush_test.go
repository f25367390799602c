package index

import (
	"errors"
	"testing"
	"time"

	"github.com/raftmq/raftmq/mmap"
	"github.com/raftmq/raftmq/vfs"
)

// gatedFlush is a mapping that behaves like msync for the index (Flush
// does not read the bytes) and whose Flush waits at a gate: it reports that
// it entered, waits for release, then flushes or fails with err.
type gatedFlush struct {
	mmap.File
	entered chan struct{}
	release chan struct{}
	err     error
}

func (g *gatedFlush) FlushReadsBytes() bool { return false }

func (g *gatedFlush) Flush(from, to int64) error {
	g.entered <- struct{}{}
	<-g.release
	if g.err != nil {
		return g.err
	}
	return g.File.Flush(from, to)
}

// gate wraps the only file of s and returns the gate.
func gate(t *testing.T, s *Service, err error) *gatedFlush {
	t.Helper()
	if len(s.files) != 1 {
		t.Fatalf("%d index files, want 1", len(s.files))
	}
	g := &gatedFlush{File: s.files[0].mf, entered: make(chan struct{}, 64), release: make(chan struct{}), err: err}
	s.files[0].mf = g
	return g
}

// TestFlushDoesNotHoldTheWriter: while the index msyncs, PutMessage goes
// on; what it wrote is left dirty for the next Flush.
func TestFlushDoesNotHoldTheWriter(t *testing.T) {
	s := openSvc(t, vfs.NewMem(), "/idx", 11, 100, nil)
	if err := s.PutMessage("T", []string{"a"}, "", 100, 1000); err != nil {
		t.Fatal(err)
	}
	g := gate(t, s, nil)
	flushed := make(chan error, 1)
	go func() { flushed <- s.Flush() }()
	<-g.entered
	put := make(chan error, 1)
	go func() { put <- s.PutMessage("T", []string{"b"}, "", 200, 2000) }()
	select {
	case err := <-put:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("PutMessage waited for the index msync")
	}
	close(g.release)
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	f := s.files[len(s.files)-1]
	if !f.metaDirty || f.dirtyLo >= f.dirtyHi {
		t.Fatalf("the put during the flush is not marked for the next one: meta %v entries [%d,%d)", f.metaDirty, f.dirtyLo, f.dirtyHi)
	}
}

// TestFailedFlushStaysDirty: a Flush that fails leaves its ranges marked,
// so the next Flush syncs them.
func TestFailedFlushStaysDirty(t *testing.T) {
	s := openSvc(t, vfs.NewMem(), "/idx", 11, 100, nil)
	if err := s.PutMessage("T", []string{"a", "b"}, "", 100, 1000); err != nil {
		t.Fatal(err)
	}
	f := s.files[0]
	lo, hi := f.dirtyLo, f.dirtyHi
	failure := errors.New("EIO")
	g := gate(t, s, failure)
	close(g.release)
	if err := s.Flush(); !errors.Is(err, failure) {
		t.Fatalf("Flush: %v, want the msync's error", err)
	}
	if !f.metaDirty || f.dirtyLo > lo || f.dirtyHi < hi {
		t.Fatalf("after a failed flush: meta %v entries [%d,%d), want true and at least [%d,%d)", f.metaDirty, f.dirtyLo, f.dirtyHi, lo, hi)
	}
}
