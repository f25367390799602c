package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/nodeproc"
	"github.com/raftmq/raftmq/node"
)

// TestKill9Restart: a follower SIGKILLed while acknowledged sends stream
// in, and a single node SIGKILLed after a fill, each with a few hundred MiB
// of commitlog over several segments (the small store files of the e2e
// clusters) and a Raft log tail since its last snapshot: each restarts
// through abnormal recovery (its log says so), serves again, and every
// acknowledged message is consumed back once, at its queue and offset,
// byte-identical; the replicas then verify byte-identical (raftmq verify).
// Raft starts after the entries the recovered store holds, so it gives the
// FSM none of them again.
// The time to serving is logged, not judged: the bench's restart matrix
// measures it (go run ./bench -rows '^$' -steps restarts).
func TestKill9Restart(t *testing.T) {
	for _, nodes := range []int{3, 1} {
		t.Run(fmt.Sprintf("%d-nodes", nodes), func(t *testing.T) { kill9Restart(t, nodes) })
	}
}

func kill9Restart(t *testing.T, nodes int) {
	c := startCluster(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	const fill, checked = "e2e-kill9-fill", "e2e-kill9"
	cli(t, ctx, c, "topic", "create", fill, "--queues", "8")
	cli(t, ctx, c, "topic", "create", checked, "--queues", "8")
	// About 300 MiB in sends of 1 MiB, as the bench's restart matrix fills.
	cli(t, ctx, c, "bench", "produce", "-t", fill, "-n", "300000", "-s", "1024", "-c", "8", "--batch", "1024", "--inflight", "2", "--quiet")

	li, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	victim := c.Nodes[(li+1)%nodes]
	ackPath := filepath.Join(t.TempDir(), "acks.tsv")
	produced := make(chan cliResult, 1)
	const sends = 20000
	if nodes == 1 {
		// A single node has no one to take the sends while it is down: it
		// is killed after they were acknowledged.
		produced <- runCLI(t, ctx, c.Bin, c.APIAddrs(), "produce", "-t", checked, "-n", strconv.Itoa(sends), "-s", "1024", "--ack-log", ackPath, "--quiet")
	} else {
		go func() {
			produced <- runCLI(t, ctx, c.Bin, c.APIAddrs(), "produce", "-t", checked, "-n", strconv.Itoa(sends), "-s", "1024", "--ack-log", ackPath, "--quiet")
		}()
		if err := pollUntil(ctx, func() error {
			if n := ackLines(ackPath); n < sends/10 {
				return fmt.Errorf("%d sends acknowledged", n)
			}
			return nil
		}); err != nil {
			t.Fatalf("load before the kill: %v", err)
		}
	}
	inFlight := ackLines(ackPath)
	if err := victim.Kill(); err != nil { // returns once the process is gone
		t.Fatal(err)
	}
	started := time.Now()
	if err := victim.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := victim.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d-node cluster: %s killed with %d of %d sends acknowledged, serving again after %v",
		nodes, victim.Spec().ID, inFlight, sends, time.Since(started).Round(time.Millisecond))
	recovered := lastStartLines(t, victim)
	if !bytes.Contains(recovered, []byte("mode=abnormal")) {
		t.Fatalf("%s's restart did not recover abnormally; its log since the start:\n%s", victim.Spec().ID, recovered)
	}
	// Raft started after the entries the recovered store holds: none was
	// read again for the FSM to skip.
	if !bytes.Contains(recovered, []byte("the FSM holds the log up to an index; starting after it")) {
		t.Fatalf("%s's Raft did not start after the store's applied entry; its log since the start:\n%s", victim.Spec().ID, recovered)
	}
	if skipped, err := scrapeCounter(ctx, victim, `raftmq_fsm_entries_total{outcome="skipped"}`); err != nil || skipped != 0 {
		t.Fatalf("%s after its restart: %v entries given to the FSM and skipped (%v), want 0", victim.Spec().ID, skipped, err)
	}
	// What those entries announced it knows from its store: every
	// member's API address.
	checkMemberAddrs(t, ctx, c, victim)

	r := <-produced
	acks := readAckFile(t, ackPath)
	unknown := 0
	for _, a := range acks {
		if a.unknown() {
			unknown++
		}
	}
	if len(acks) != sends || r.code != 0 && unknown == 0 {
		t.Fatalf("produce: exit %d, %d ack lines (%d unknown)\nstdout: %s\nstderr: %s", r.code, len(acks), unknown, r.stdout, r.stderr)
	}
	got := consumeChecked(t, ctx, c, checked, 1024, acks)
	t.Logf("%d acknowledged (%d unknown), %d consumed back byte-identical", len(acks)-unknown, unknown, got)
	verifyReplicas(t, ctx, c)
}

// checkMemberAddrs: p's /status gives every node of c with its API
// address.
func checkMemberAddrs(t *testing.T, ctx context.Context, c *nodeproc.Cluster, p *nodeproc.Proc) {
	t.Helper()
	body, err := p.Get(ctx, "/status")
	if err != nil {
		t.Fatal(err)
	}
	var st node.StatusJSON
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("%s /status: %v: %s", p.Spec().ID, err, body)
	}
	got := map[string]string{}
	for _, m := range st.Members {
		got[m.ID] = m.APIAddr
	}
	for _, n := range c.Nodes {
		if got[n.Spec().ID] != n.Spec().APIAddr {
			t.Fatalf("%s /status gives %s's API address as %q, want %q (members %+v)", p.Spec().ID, n.Spec().ID, got[n.Spec().ID], n.Spec().APIAddr, st.Members)
		}
	}
}

// ackLines is how many sends the --ack-log file at path has settled.
func ackLines(path string) int {
	b, _ := os.ReadFile(path)
	return bytes.Count(b, []byte("\n"))
}

// lastStartLines is p's log from the last time nodeproc started it.
func lastStartLines(t *testing.T, p *nodeproc.Proc) []byte {
	t.Helper()
	b, err := os.ReadFile(p.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	if i := bytes.LastIndex(b, []byte("=== nodeproc ")); i >= 0 {
		b = b[i:]
	}
	return b
}
