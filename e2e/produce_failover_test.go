package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCLIProduceThroughLeaderKill runs `raftmq produce` with the shipped
// client defaults against three real nodes with the default Raft timeouts
// and kills the leader with SIGKILL while it runs. The client's retries are
// bounded by time (30 s), not by a count of tries, so the election fits in
// them: no send may fail. Sends in flight to the killed leader may end with
// an unknown outcome; every acknowledged message is then read back exactly
// once, and no more messages than were unknown besides.
func TestCLIProduceThroughLeaderKill(t *testing.T) {
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	const topic, n, batch, conc = "e2e-cli-kill", 100000, 64, 4
	cli(t, ctx, c, "topic", "create", topic, "--queues", "4")
	ackPath := filepath.Join(t.TempDir(), "acks.tsv")

	args := []string{"--server", strings.Join(c.APIAddrs(), ","), "--json", "produce", "-t", topic,
		"-n", fmt.Sprint(n), "-s", "32", "--batch", fmt.Sprint(batch), "-c", fmt.Sprint(conc), "--ack-log", ackPath}
	cmd := exec.CommandContext(ctx, c.Bin.CLI, args...)
	cmd.WaitDelay = 5 * time.Second
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	old, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Kill once the produce has stored some messages (the leader's max
	// offset moved), while it still runs.
	wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
	err = pollUntil(wctx, func() error {
		st, err := c.Nodes[old].Status(wctx)
		if err != nil {
			return err
		}
		if st.MaxOffset < 64<<10 {
			return fmt.Errorf("leader maxOffset %d", st.MaxOffset)
		}
		return nil
	})
	wcancel()
	if err != nil {
		t.Fatalf("produce did not get going: %v\nstderr: %s", err, errOut.String())
	}
	if old, err = c.Leader(ctx); err != nil { // the leader of now, should it have changed
		t.Fatal(err)
	}
	if err := c.Nodes[old].Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		t.Fatalf("produce finished before the kill took effect (%v): raise -n; stdout %s", err, out.String())
	default:
	}
	t.Logf("killed leader %s", c.Nodes[old].Spec().ID)

	var runErr error
	select {
	case runErr = <-exited:
	case <-ctx.Done():
		t.Fatalf("produce did not finish: %v\nstderr: %s", ctx.Err(), errOut.String())
	}
	var exit *exec.ExitError
	if runErr != nil && !errors.As(runErr, &exit) {
		t.Fatal(runErr)
	}
	var sum struct {
		Count, Failed, Unknown int64
	}
	if err := json.Unmarshal(out.Bytes(), &sum); err != nil {
		t.Fatalf("produce summary %q: %v (stderr %s)", out.String(), err, errOut.String())
	}
	t.Logf("produce: %+v, exit %v", sum, runErr)
	if runErr != nil {
		t.Logf("produce stderr: %s", lastLines(errOut.String(), 5))
	}
	if sum.Failed != 0 {
		t.Fatalf("%d sends failed through a leader kill (want 0): %s", sum.Failed, errOut.String())
	}
	// Unknown outcomes are the sends in flight when a leader went away:
	// one window (batch*conc) per leader change. A loaded machine may see a
	// few changes; more than 8 windows means sends that never reached a
	// node were counted unknown (a client that kept calling the dead leader
	// once made 99% of the run unknown).
	if sum.Unknown > 8*batch*conc {
		t.Fatalf("%d unknown outcomes, more than 8 windows of %d: %s", sum.Unknown, batch*conc, errOut.String())
	}
	if sum.Count+sum.Unknown != n {
		t.Fatalf("acknowledged %d + unknown %d, want %d", sum.Count, sum.Unknown, n)
	}
	if (sum.Unknown == 0) != (runErr == nil) {
		t.Fatalf("exit %v with %d unknown outcomes: want exit 1 exactly when some are unknown", runErr, sum.Unknown)
	}

	data, err := os.ReadFile(ackPath)
	if err != nil {
		t.Fatal(err)
	}
	acks := readAckLog(t, string(data))
	acked := map[string]bool{}
	for _, a := range acks {
		if !a.unknown() {
			acked[a.msgID] = true
		}
	}
	if int64(len(acked)) != sum.Count {
		t.Fatalf("ack log has %d acknowledged lines, summary %d", len(acked), sum.Count)
	}
	got := map[string]int{}
	for _, m := range jsonLines[consumedMessage](t, cli(t, ctx, c, "--json", "consume", "-t", topic, "--to-end")) {
		got[m.MsgID]++
	}
	for id := range acked {
		if got[id] != 1 {
			t.Fatalf("acknowledged message %s read %d times", id, got[id])
		}
	}
	if extra := int64(len(got)) - sum.Count; extra < 0 || extra > sum.Unknown {
		t.Fatalf("read %d distinct messages: %d acknowledged, %d unknown", len(got), sum.Count, sum.Unknown)
	}

	// `verify --json` reports each store's fields, not a text blob.
	if err := c.Stop(ctx); err != nil {
		t.Fatalf("graceful stop of the survivors: %v", err)
	}
	r := runCLI(t, ctx, c.Bin, nil, append([]string{"--json", "verify"}, c.Dirs()...)...)
	var rep struct {
		OK     bool
		Stores []struct {
			Dir    string
			OK     bool
			Fields map[string]int64
			Errors []string
		}
		Comparison *struct {
			OK      bool
			Message string
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("verify --json: %q: %v", r.stdout, err)
	}
	if len(rep.Stores) != 3 || rep.Comparison == nil || rep.OK != (r.code == 0) {
		t.Fatalf("verify --json (exit %d): %s", r.code, r.stdout)
	}
	for _, st := range rep.Stores {
		if _, ok := st.Fields["messages"]; !ok || st.OK != (len(st.Errors) == 0) {
			t.Fatalf("verify --json store %+v", st)
		}
	}
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
