package node

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/internal/testseed"
)

// walTestSegment keeps raft-wal segments small so the tests rotate them.
const walTestSegment = 1 << 20

// walEntry is the deterministic content of entry i: 64 B to ~4 KiB.
func walEntry(i uint64) []byte {
	b := make([]byte, 64+(i*7919)%4000)
	r := rand.New(rand.NewPCG(i, 0x5eed))
	for j := range b {
		b[j] = byte(r.Uint32())
	}
	return b
}

func storeWALBatch(st RaftStore, from uint64, n int) error {
	logs := make([]*raft.Log, n)
	for k := range logs {
		i := from + uint64(k)
		logs[k] = &raft.Log{Index: i, Term: 1 + i/1000, Type: raft.LogCommand, Data: walEntry(i)}
	}
	return st.StoreLogs(logs)
}

// checkWAL verifies that st holds a contiguous log whose last index is at
// least acked and whose every entry has its deterministic content.
func checkWAL(t *testing.T, st RaftStore, acked uint64) (first, last uint64) {
	t.Helper()
	first, err := st.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	last, err = st.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	if last < acked {
		t.Fatalf("last index %d < %d acknowledged", last, acked)
	}
	if last > 0 && first == 0 {
		t.Fatalf("first index 0 with last %d", last)
	}
	for i := first; i <= last && last > 0; i++ {
		var l raft.Log
		if err := st.GetLog(i, &l); err != nil {
			t.Fatalf("entry %d of [%d, %d]: %v", i, first, last, err)
		}
		if l.Index != i || l.Term != 1+i/1000 || !bytes.Equal(l.Data, walEntry(i)) {
			t.Fatalf("entry %d of [%d, %d] has index %d, term %d, %d bytes: not what was stored", i, first, last, l.Index, l.Term, len(l.Data))
		}
	}
	return first, last
}

func openTestWAL(t *testing.T, dir string) RaftStore {
	t.Helper()
	st, err := OpenRaftStoreWith(LogStoreWAL, dir, RaftStoreOptions{WALSegmentSize: walTestSegment})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestRaftWALTornTail tears the last batch written to a raft-wal segment
// the ways a power loss can (a prefix of it, or any subset of its pages,
// reached the disk) and checks that the log reopens with every earlier
// entry intact, the torn batch either whole or gone, and appends working.
func TestRaftWALTornTail(t *testing.T) {
	rng := rand.New(rand.NewPCG(uint64(testseed.Seed(t)), 1))
	for trial := range 12 {
		dir := t.TempDir()
		st := openTestWAL(t, dir)
		next := uint64(1)
		for range 1 + rng.IntN(30) {
			n := 1 + rng.IntN(8)
			if err := storeWALBatch(st, next, n); err != nil {
				t.Fatal(err)
			}
			next += uint64(n)
		}
		before := next - 1
		must(t, st.Close())
		seg := newestSegment(t, filepath.Join(dir, "wal"))
		old, err := os.ReadFile(seg)
		must(t, err)

		st = openTestWAL(t, dir)
		n := 2 + rng.IntN(10)
		must(t, storeWALBatch(st, next, n))
		must(t, st.Close())
		if got := newestSegment(t, filepath.Join(dir, "wal")); got != seg {
			t.Fatalf("trial %d: the torn batch went to a new segment %s", trial, got)
		}
		cur, err := os.ReadFile(seg)
		must(t, err)
		lo, hi := diffRange(old, cur)
		if lo >= hi {
			t.Fatalf("trial %d: the batch changed no byte of %s", trial, seg)
		}
		torn := bytes.Clone(old)
		mode := "prefix"
		switch trial % 3 {
		case 0: // a prefix of the batch's bytes
			copy(torn[lo:], cur[lo:lo+rng.IntN(hi-lo)])
		case 1: // any subset of its 4 KiB pages
			mode = "pages"
			for p := lo &^ 4095; p < hi; p += 4096 {
				if rng.IntN(2) == 0 {
					end := min(p+4096, len(cur))
					copy(torn[p:end], cur[p:end])
				}
			}
		case 2: // all of it except its last byte
			mode = "all-but-last-byte"
			copy(torn[lo:hi-1], cur[lo:hi-1])
		}
		must(t, os.WriteFile(seg, torn, 0o644))

		st = openTestWAL(t, dir)
		_, last := checkWAL(t, st, before)
		if last != before && last != before+uint64(n) {
			t.Fatalf("trial %d (%s): last index %d after tearing the batch [%d, %d]: not %d or %d",
				trial, mode, last, before+1, before+uint64(n), before, before+uint64(n))
		}
		must(t, storeWALBatch(st, last+1, 3))
		must(t, st.Close())
		st = openTestWAL(t, dir)
		checkWAL(t, st, last+3)
		must(t, st.Close())
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func newestSegment(t *testing.T, dir string) string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	must(t, err)
	if len(names) == 0 {
		t.Fatalf("no segment in %s", dir)
	}
	return names[len(names)-1] // names sort by base index
}

func diffRange(a, b []byte) (lo, hi int) {
	n := min(len(a), len(b))
	for lo < n && a[lo] == b[lo] {
		lo++
	}
	hi = n
	for hi > lo && a[hi-1] == b[hi-1] {
		hi--
	}
	return lo, hi
}

// walChildEnv names the directory a TestRaftWALKill9 child writes to.
const walChildEnv = "RAFTMQ_WAL_CHILD_DIR"

// TestRaftWALKill9 runs a child process that appends batches to a raft-wal
// log (compacting it as raft does, rotating 1 MiB segments) and reports
// each acknowledged batch; the test kills it with SIGKILL at a random
// point, reopens the log and checks that nothing acknowledged is lost and
// every entry reads back intact, three times over the same directory. It
// found the interrupted-rotation wedge fixed in third_party/raft-wal.
func TestRaftWALKill9(t *testing.T) {
	if dir := os.Getenv(walChildEnv); dir != "" {
		walChild(dir)
		return
	}
	rng := rand.New(rand.NewPCG(uint64(testseed.Seed(t)), 2))
	dir := t.TempDir()
	var acked uint64
	for round := range 3 {
		acked = killWALChild(t, dir, 20+rng.IntN(300), round)
		st := openTestWAL(t, dir)
		first, last := checkWAL(t, st, acked)
		t.Logf("round %d: killed after %d acknowledged, reopened [%d, %d]", round, acked, first, last)
		must(t, st.Close())
	}
}

// killWALChild starts the child, waits for batches more acknowledgements
// and kills it; it returns the last acknowledged index.
func killWALChild(t *testing.T, dir string, batches, round int) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestRaftWALKill9$")
	cmd.Env = append(os.Environ(), walChildEnv+"="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	sc := bufio.NewScanner(out)
	var acked uint64
	seen := 0
	for seen < batches && sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "acked "); ok {
			n, err := strconv.ParseUint(v, 10, 64)
			must(t, err)
			acked, seen = n, seen+1
		}
	}
	if seen < batches {
		_ = cmd.Process.Kill()
		t.Fatalf("round %d: child stopped after %d of %d batches: %v %v", round, seen, batches, sc.Err(), cmd.Wait())
	}
	must(t, cmd.Process.Signal(syscall.SIGKILL))
	// Acknowledgements printed before the kill landed still count.
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "acked "); ok {
			if n, err := strconv.ParseUint(v, 10, 64); err == nil {
				acked = n
			}
		}
	}
	var exit *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("round %d: child did not die of SIGKILL: %v", round, err)
	}
	return acked
}

// walChild appends until killed: batches of 1–16 entries after the log's
// last index, an "acked <last index>" line after each StoreLogs returns,
// and DeleteRange of all but 100 entries whenever the log exceeds 400.
func walChild(dir string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "wal child:", err)
		os.Exit(3)
	}
	st, err := OpenRaftStoreWith(LogStoreWAL, dir, RaftStoreOptions{WALSegmentSize: walTestSegment})
	if err != nil {
		fail(err)
	}
	first, err1 := st.FirstIndex()
	last, err2 := st.LastIndex()
	if err := errors.Join(err1, err2); err != nil {
		fail(err)
	}
	if first == 0 {
		first = 1
	}
	w := bufio.NewWriter(os.Stdout)
	for i := uint64(0); ; i++ {
		n := 1 + int(i*31%16)
		if err := storeWALBatch(st, last+1, n); err != nil {
			fail(err)
		}
		last += uint64(n)
		fmt.Fprintf(w, "acked %d\n", last)
		if err := w.Flush(); err != nil {
			fail(err)
		}
		if last-first+1 > 400 {
			if err := st.DeleteRange(first, last-100); err != nil {
				fail(err)
			}
			first = last - 99
		}
	}
}

// TestOpenRaftStoreKindMismatch: a data dir holding one kind's log is not
// opened as the other kind (that would start an empty log).
func TestOpenRaftStoreKindMismatch(t *testing.T) {
	for _, c := range []struct{ wrote, open string }{{LogStoreBolt, LogStoreWAL}, {LogStoreWAL, LogStoreBolt}} { // "" and "auto" open what is there: TestLogStoreAutoKeepsTheDirsKind
		dir := t.TempDir()
		st, err := OpenRaftStore(c.wrote, dir, nil)
		must(t, err)
		must(t, st.SetUint64([]byte("CurrentTerm"), 7))
		must(t, st.Close())
		if st, err := OpenRaftStore(c.open, dir, nil); !errors.Is(err, ErrLogStoreMismatch) {
			if err == nil {
				st.Close()
			}
			t.Fatalf("wrote %q, opened as %q: %v, want ErrLogStoreMismatch", c.wrote, c.open, err)
		}
		st, err = OpenRaftStore(c.wrote, dir, nil)
		must(t, err)
		v, err := st.GetUint64([]byte("CurrentTerm"))
		if err != nil || v != 7 {
			t.Fatalf("reopened %q: term %d, %v", c.wrote, v, err)
		}
		must(t, st.Close())
	}
}

// TestRaftStoreCompactedIsGone: after DeleteRange of the head, every kind
// answers raft.ErrLogNotFound below FirstIndex — raft decides to send a
// snapshot on that error (raft-wal on its own still returns such entries
// while their segment is kept).
func TestRaftStoreCompactedIsGone(t *testing.T) {
	for _, kind := range []string{LogStoreWAL, LogStoreBolt} {
		st, err := OpenRaftStore(kind, t.TempDir(), nil)
		must(t, err)
		must(t, storeWALBatch(st, 1, 50))
		must(t, st.DeleteRange(1, 30))
		first, last := checkWAL(t, st, 50)
		if first != 31 || last != 50 {
			t.Fatalf("%s: log [%d, %d] after deleting [1, 30] of [1, 50]", kind, first, last)
		}
		for _, i := range []uint64{1, 17, 30} {
			var l raft.Log
			if err := st.GetLog(i, &l); !errors.Is(err, raft.ErrLogNotFound) {
				t.Fatalf("%s: GetLog(%d) after DeleteRange(1, 30): %v, want raft.ErrLogNotFound", kind, i, err)
			}
		}
		must(t, st.Close())
	}
}
