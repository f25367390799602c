package store

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/recovery"
	"github.com/raftmq/raftmq/vfs"
)

// The kill -9 test: a child process (this test binary, TestKillChild)
// appends entries to a store on the real file system and prints each Raft
// index once AppendMessages returns; the parent kills it with SIGKILL after
// a random number of lines, reopens the store and checks that everything the
// child reported is there (the page cache survives kill -9).

const killChildEnv = "RAFTMQ_KILL_CHILD_DIR"

func killConfig(dir string) Config {
	c := smallConfig(dir)
	c.FlushInterval = 50 * time.Millisecond // checkpoints race the kill
	return c
}

// killEntry is entry i's messages; both processes derive them from i.
func killEntry(i uint64) []message.Message {
	rng := rand.New(rand.NewSource(int64(i)))
	msgs := make([]message.Message, 1+rng.Intn(4))
	for j := range msgs {
		msgs[j] = testMessage("kill", int32(rng.Intn(4)), int(i)*10+j, rng)
	}
	return msgs
}

// TestKillChild is the child: it runs only under killChildEnv.
func TestKillChild(t *testing.T) {
	dir := os.Getenv(killChildEnv)
	if dir == "" {
		t.Skip("child of TestKill9 only")
	}
	s := mustOpen(t, vfs.OS(), killConfig(dir))
	from, _ := s.Applied()
	w := bufio.NewWriter(os.Stdout)
	for i := from + 1; ; i++ {
		res, err := s.AppendMessages(header(i), killEntry(i), nil)
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("append %d: %v", i, r.Err)
			}
		}
		fmt.Fprintf(w, "applied %d\n", i)
		w.Flush()
	}
}

func TestKill9(t *testing.T) {
	if os.Getenv(killChildEnv) != "" {
		t.Skip("in the child")
	}
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	dir := t.TempDir()
	kills := 10
	if testing.Short() {
		kills = 3
	}
	for k := 0; k < kills; k++ {
		n := uint64(50 + rng.Intn(400))
		last := runAndKill(t, dir, n)
		checkAfterKill(t, dir, last, k)
	}
}

// runAndKill starts the child, reads until it has reported n more entries,
// SIGKILLs it and returns the last index it reported.
func runAndKill(t *testing.T, dir string, n uint64) uint64 {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), killChildEnv+"="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	done := false
	t.Cleanup(func() {
		if !done {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			_ = cmd.Wait()
		}
	})
	lines := make(chan uint64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var i uint64
			if _, err := fmt.Sscanf(sc.Text(), "applied %d", &i); err == nil {
				lines <- i
			}
		}
	}()
	var seen, last uint64
	deadline := time.After(60 * time.Second)
	for seen < n {
		select {
		case i, ok := <-lines:
			if !ok {
				t.Fatalf("child exited after %d entries: %s", seen, stderr.String())
			}
			seen, last = seen+1, i
		case <-deadline:
			t.Fatalf("child reported %d of %d entries in 60 s: %s", seen, n, stderr.String())
		}
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for range lines { // drain so the reader goroutine ends
	}
	_ = cmd.Wait()
	done = true
	return last
}

func checkAfterKill(t *testing.T, dir string, last uint64, k int) {
	t.Helper()
	s := mustOpen(t, vfs.OS(), killConfig(dir))
	defer s.Close()
	p := s.RecoveryPlan()
	applied, _ := s.Applied()
	t.Logf("kill %d: child reported %d, recovered %d (tail %v, %d entries scanned)", k, last, applied, p.Tail, p.Entries)
	if p.Mode != recovery.Abnormal {
		t.Fatalf("kill %d: recovery mode %v, want abnormal", k, p.Mode)
	}
	if applied < last {
		t.Fatalf("kill %d: applied %d < %d the child reported", k, applied, last)
	}
	next := map[int32]int64{}
	for i := uint64(1); i <= applied; i++ {
		for j, m := range killEntry(i) {
			off := next[m.QueueID]
			next[m.QueueID]++
			r, err := s.GetMessages("kill", m.QueueID, off, 1, 0, "")
			if err != nil || r.Status != Found || !bytes.Equal(r.Messages[0].Body, m.Body) {
				t.Fatalf("kill %d: entry %d message %d (queue %d offset %d): %v %v", k, i, j, m.QueueID, off, err, r.Status)
			}
			key := "k" + strconv.Itoa(int(i)*10+j)
			if found, err := s.QueryByKey("kill", key, 4, 0, 1<<62); err != nil || len(found) != 1 {
				t.Fatalf("kill %d: key %s: %v, %d hits", k, key, err, len(found))
			}
		}
	}
	for q, n := range next {
		if got, _ := s.MaxOffset("kill", q); got != n {
			t.Fatalf("kill %d: queue %d max offset %d, want %d", k, q, got, n)
		}
	}
}
