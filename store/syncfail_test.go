package store

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/raftmq/raftmq/recovery"
	"github.com/raftmq/raftmq/vfs"
)

// failNthSync fails the n-th file or directory sync (0-based) with an
// injected EIO, once, and counts every sync it sees.
type failNthSync struct {
	n     int64
	seen  atomic.Int64
	fired atomic.Bool
}

func (f *failNthSync) MaybeError(op vfs.Op) error {
	if op.Kind != vfs.OpSync && op.Kind != vfs.OpSyncDir {
		return nil
	}
	if f.seen.Add(1)-1 == f.n {
		f.fired.Store(true)
		return fmt.Errorf("%w: EIO on %s %s", vfs.ErrInjected, op.Kind, op.Path)
	}
	return nil
}

// One injected sync failure, at every sync point of the crash workload in
// turn: the store fails closed — no checkpoint is written after it (so none
// can cover data the failed sync may have lost), no write is taken, Close
// keeps the abort file — and a power loss right after it recovers to a
// prefix no shorter than the last checkpoint written before the failure.
func TestSyncFailureFailsClosed(t *testing.T) {
	seed := testSeed(t)
	cfg := crashConfig()
	ckptPath := filepath.Join(cfg.Dir, recovery.CheckpointName)
	points, failedAt := 0, map[string]int{}
	for k := int64(0); ; k++ {
		mem := vfs.NewMem()
		inj := &failNthSync{n: k}
		cfg := cfg
		var told atomic.Int32
		cfg.OnFailure = func(error) { told.Add(1) }
		s, err := Open(vfs.WithInjector(mem, inj), cfg)
		if err != nil {
			if !inj.fired.Load() {
				t.Fatalf("seed %d k=%d: open failed without an injected failure: %v", seed, k, err)
			}
			failedAt["open"]++
			points++
			continue
		}
		model := newModel()
		werr := runWorkload(s, seed, model, 1)
		if !inj.fired.Load() {
			if werr != nil {
				t.Fatalf("seed %d k=%d: workload failed without an injected failure: %v", seed, k, werr)
			}
			werr = s.Close()
			if !inj.fired.Load() {
				if werr != nil {
					t.Fatalf("seed %d k=%d: close: %v", seed, k, werr)
				}
				break // k is past the workload's last sync
			}
		}
		points++
		label := fmt.Sprintf("seed %d k=%d", seed, k)
		where := checkFailedClosed(t, s, mem, ckptPath, model, werr, label)
		failedAt[where]++
		// A failure while open is told once; Close's own cleanup (after the
		// final checkpoint) reports through its error instead.
		if n := told.Load(); n > 1 || (where == "workload" && n != 1) {
			t.Fatalf("%s: OnFailure called %d times", label, n)
		}
		// Power loss now: unsynced writes are gone.
		s2, err := Open(mem.CrashClone(vfs.CrashOptions{Mode: vfs.DropUnsynced}), cfg)
		if err != nil {
			t.Fatalf("%s: reopen after the failure and a power loss: %v", label, err)
		}
		checkRecovered(t, s2, model, label)
		_ = s2.Close()
	}
	if points < 20 {
		t.Fatalf("seed %d: only %d sync points exercised", seed, points)
	}
	t.Logf("seed %d: %d sync points, failure surfaced in: %v", seed, points, failedAt)
}

// checkFailedClosed checks the store after the injected failure: nothing
// more is written or checkpointed. It returns where the failure surfaced.
func checkFailedClosed(t *testing.T, s *Store, mem *vfs.MemFS, ckptPath string, m *workloadModel, werr error, label string) string {
	t.Helper()
	if s.closed.Load() { // the failure came from Close (werr is its error)
		if werr == nil {
			t.Fatalf("%s: Close hid the injected sync failure", label)
		}
		return "close"
	}
	if werr != nil && !errors.Is(werr, ErrFailedClosed) && !errors.Is(werr, vfs.ErrInjected) {
		t.Fatalf("%s: workload error %v is neither ErrFailedClosed nor the injected error", label, werr)
	}
	if err := s.Failed(); !errors.Is(err, ErrFailedClosed) {
		t.Fatalf("%s: store not failed closed after the injected sync error (%v): %v", label, werr, err)
	}
	before, _ := mem.ReadFile(ckptPath)
	if err := s.Flush(); !errors.Is(err, ErrFailedClosed) {
		t.Fatalf("%s: Flush after the failure: %v", label, err)
	}
	next := m.applied + 1
	if _, err := s.AppendMessages(header(next), workloadEntry(rand.New(rand.NewSource(1)), 1), nil); !errors.Is(err, ErrFailedClosed) {
		t.Fatalf("%s: append after the failure: %v", label, err)
	}
	if err := s.Close(); !errors.Is(err, ErrFailedClosed) {
		t.Fatalf("%s: Close after the failure: %v", label, err)
	}
	if after, _ := mem.ReadFile(ckptPath); !bytes.Equal(before, after) {
		t.Fatalf("%s: a checkpoint was written after the failed sync", label)
	}
	if _, err := mem.Stat(filepath.Join(s.cfg.Dir, recovery.AbortName)); err != nil {
		t.Fatalf("%s: Close after a failed sync removed the abort file: %v", label, err)
	}
	return "workload"
}
