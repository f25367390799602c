package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/nodeproc"
)

// bigRuns is how many messages of 1 MiB TestLargeBodies produces: the
// issue's 2,000 (2 GiB per node) with RAFTMQ_E2E_BIG=1, else 200.
func bigRuns() int {
	if os.Getenv("RAFTMQ_E2E_BIG") == "1" {
		return 2000
	}
	return 200
}

// TestLargeBodies: `raftmq produce` of 4 MiB bodies (the store's limit)
// and of 1 MiB bodies goes through the CLI's batches (bounded by bytes
// below the gRPC limit), a follower or the leader, the leader's group
// commit (a Send larger than max_bytes split across entries) and Raft;
// `raftmq consume --to-end` gives every acknowledged message back once,
// byte-identical, and a query by key or id returns them too (a query by
// key bounded by bytes, at least one message). A body one byte over the
// limit is refused with the clear error, nothing stored; replicas end
// byte-identical.
func TestLargeBodies(t *testing.T) {
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	for _, run := range []struct {
		topic string
		size  int
		n     int
	}{{"e2e-big4m", 4 << 20, 100}, {"e2e-big1m", 1 << 20, bigRuns()}} {
		ackPath := filepath.Join(t.TempDir(), "acks.tsv")
		r := runCLI(t, ctx, c.Bin, c.APIAddrs(), "produce", "-t", run.topic, "-n", strconv.Itoa(run.n), "-s", strconv.Itoa(run.size),
			"--key", "big-"+run.topic, "--ack-log", ackPath, "--quiet")
		acks := readAckFile(t, ackPath)
		unknown := 0
		for _, a := range acks {
			if a.unknown() {
				unknown++
			}
		}
		t.Logf("produce -s %d -n %d: exit %d, %d acknowledged, %d unknown: %s", run.size, run.n, r.code, len(acks)-unknown, unknown, strings.TrimSpace(r.stdout))
		if len(acks) != run.n || (r.code != 0 && unknown == 0) {
			// An unknown outcome is a leadership change on a loaded
			// machine; a failed send is a bug.
			t.Fatalf("produce -s %d -n %d: exit %d, %d ack lines\nstdout: %s\nstderr: %s", run.size, run.n, r.code, len(acks), r.stdout, r.stderr)
		}
		got := consumeChecked(t, ctx, c, run.topic, run.size, acks)
		t.Logf("consume --to-end: %d messages, bodies byte-identical", got)

		found := jsonLines[consumedMessage](t, cli(t, ctx, c, "query", "--key", "big-"+run.topic, "-t", run.topic, "--json"))
		if len(found) == 0 {
			t.Fatalf("query --key: no message")
		}
		for _, m := range found {
			if m.Body != producedBody(m.MsgID, run.size) {
				t.Fatalf("query --key: message %s with a body not the produced one", m.MsgID)
			}
		}
		id := acks[len(acks)/2].msgID
		found = jsonLines[consumedMessage](t, cli(t, ctx, c, "query", "--msg-id", id, "--json"))
		if len(found) != 1 || found[0].Body != producedBody(id, run.size) {
			t.Fatalf("query --msg-id %s: %d messages, or not its body", id, len(found))
		}
	}

	r := runCLI(t, ctx, c.Bin, c.APIAddrs(), "produce", "-t", "e2e-toobig", "-n", "1", "-s", strconv.Itoa(4<<20+1))
	if r.code != 1 || !strings.Contains(r.stderr, "the limit is 4194304") {
		t.Fatalf("a body over 4 MiB: exit %d, stderr %q; want 1 and the limit named", r.code, r.stderr)
	}
	verifyReplicas(t, ctx, c)
}

// readAckFile reads a --ack-log file.
func readAckFile(t *testing.T, path string) []ack {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return readAckLog(t, string(data))
}

// consumeChecked runs `raftmq consume -t topic --to-end --json` and checks
// its output as it streams (bodies of up to 2 GiB in all are not kept):
// every acknowledged message once, at its queue and offset, with the
// produced body; a message whose send had an unknown outcome at most once.
// It returns how many messages were consumed.
func consumeChecked(t *testing.T, ctx context.Context, c *nodeproc.Cluster, topic string, size int, acks []ack) int {
	t.Helper()
	want := make(map[string]ack, len(acks))
	for _, a := range acks {
		want[a.msgID] = a
	}
	cmd := exec.CommandContext(ctx, c.Bin.CLI, "--server", strings.Join(c.APIAddrs(), ","), "consume", "-t", topic, "--to-end", "--json", "--quiet")
	cmd.WaitDelay = 5 * time.Second
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	seen, checkErr := readConsumed(out, want, size)
	if checkErr != nil {
		_ = cmd.Process.Kill()
	}
	_, _ = io.Copy(io.Discard, out)
	werr := cmd.Wait()
	if checkErr != nil {
		t.Fatal(checkErr)
	}
	if werr != nil {
		t.Fatalf("consume: %v\nstderr: %s", werr, stderr.String())
	}
	for id, a := range want {
		if !a.unknown() && !seen[id] {
			t.Fatalf("acknowledged message %s (queue %s offset %s) not consumed", id, a.queue, a.offset)
		}
	}
	return len(seen)
}

// readConsumed decodes consume --json lines from r and checks each
// against want.
func readConsumed(r io.Reader, want map[string]ack, size int) (map[string]bool, error) {
	seen := map[string]bool{}
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		if len(strings.TrimSpace(string(line))) > 0 {
			var m consumedMessage
			if err := json.Unmarshal(line, &m); err != nil {
				return seen, fmt.Errorf("not a JSON line (%d bytes): %w", len(line), err)
			}
			a, ok := want[m.MsgID]
			switch {
			case !ok:
				return seen, fmt.Errorf("consumed %s, which was never produced", m.MsgID)
			case seen[m.MsgID]:
				return seen, fmt.Errorf("message %s consumed twice", m.MsgID)
			case !a.unknown() && fmt.Sprintf("%d/%d", m.QueueID, m.QueueOffset) != a.queue+"/"+a.offset:
				return seen, fmt.Errorf("message %s at %d/%d, acknowledged at %s/%s", m.MsgID, m.QueueID, m.QueueOffset, a.queue, a.offset)
			case m.BodyEncoding != "" || m.Body != producedBody(m.MsgID, size):
				return seen, fmt.Errorf("message %s: body of %d bytes (encoding %q) is not the produced one", m.MsgID, len(m.Body), m.BodyEncoding)
			}
			seen[m.MsgID] = true
		}
		if errors.Is(err, io.EOF) {
			return seen, nil
		}
		if err != nil {
			return seen, err
		}
	}
}

// verifyReplicas stops the cluster (SIGTERM) and runs `raftmq verify` on
// the three data dirs: each consistent, replicas byte-identical.
func verifyReplicas(t *testing.T, ctx context.Context, c *nodeproc.Cluster) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := c.Stop(sctx); err != nil {
		t.Fatalf("cluster stop: %v", err)
	}
	args := append([]string{"verify"}, c.Dirs()...)
	r := runCLI(t, ctx, c.Bin, nil, args...)
	if r.code != 0 {
		t.Fatalf("raftmq verify: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
}
