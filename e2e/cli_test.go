package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/nodeproc"
)

// producedBody is the body `raftmq produce -s size` gives a message: the
// msgId, then a-z repeating by position (the CLI contract in README.md: a body of the
// requested size that embeds the msgId).
func producedBody(id string, size int) string {
	b := make([]byte, max(size, len(id)))
	n := copy(b, id)
	for i := n; i < len(b); i++ {
		b[i] = 'a' + byte(i%26)
	}
	return string(b)
}

type topicJSON struct {
	Topic        string `json:"topic"`
	Queues       int32  `json:"queues"`
	QueueOffsets []struct {
		QueueID   int32 `json:"queueId"`
		MinOffset int64 `json:"minOffset"`
		MaxOffset int64 `json:"maxOffset"`
	} `json:"queueOffsets"`
}

// TestCLI drives a three-node cluster through the raftmq binary only:
// topic create/list/describe, produce with --ack-log, consume --to-end
// --json (every acknowledged message exactly once, same body, same queue
// and offset), keys and tags, query by key and by msgId, a consumer group
// that commits and resumes, cluster status and transfer, topic delete, and
// the exit codes of a failed operation (1) and of bad usage (2).
func TestCLI(t *testing.T) {
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const topic, size = "e2e-cli", 200

	out := cli(t, ctx, c, "topic", "create", topic, "--queues", "4", "--json")
	if !strings.Contains(out, `"created":true`) {
		t.Fatalf("topic create: %s", out)
	}
	topics := jsonLines[topicJSON](t, cli(t, ctx, c, "topic", "list", "--json"))
	if !slices.ContainsFunc(topics, func(x topicJSON) bool { return x.Topic == topic && x.Queues == 4 }) {
		t.Fatalf("topic list has no %s with 4 queues: %+v", topic, topics)
	}

	ackPath := filepath.Join(t.TempDir(), "acks.tsv")
	cli(t, ctx, c, "produce", "-t", topic, "-n", "1500", "-s", strconv.Itoa(size), "--tag", "TA", "--key", "bulk", "--ack-log", ackPath)
	cli(t, ctx, c, "produce", "-t", topic, "-n", "5", "-s", strconv.Itoa(size), "--tag", "TB", "--key", "rare-key", "--ack-log", ackPath)
	ackData, err := os.ReadFile(ackPath)
	if err != nil {
		t.Fatal(err)
	}
	acks := readAckLog(t, string(ackData))
	if len(acks) != 1505 {
		t.Fatalf("ack log has %d lines, want 1505", len(acks))
	}
	for _, a := range acks {
		if a.unknown() || a.topic != topic {
			t.Fatalf("ack log line %+v: want a known outcome in topic %s (no faults were injected)", a, topic)
		}
	}

	msgs := jsonLines[consumedMessage](t, cli(t, ctx, c, "consume", "-t", topic, "--to-end", "--json"))
	byID := checkConsumedOnce(t, msgs, acks, topic, size)
	for _, m := range msgs {
		wantTag, wantKey := "TA", "bulk"
		if len(m.Keys) == 1 && m.Keys[0] == "rare-key" {
			wantTag, wantKey = "TB", "rare-key"
		}
		if m.Tags != wantTag || !slices.Equal(m.Keys, []string{wantKey}) {
			t.Fatalf("message %s: tags %q keys %v, want %q [%s]", m.MsgID, m.Tags, m.Keys, wantTag, wantKey)
		}
	}

	desc := jsonLines[topicJSON](t, cli(t, ctx, c, "topic", "describe", topic, "--json"))
	var total int64
	for _, q := range desc[0].QueueOffsets {
		total += q.MaxOffset - q.MinOffset
	}
	if len(desc) != 1 || desc[0].Queues != 4 || total != 1505 {
		t.Fatalf("describe: %+v (total %d, want 1505)", desc, total)
	}

	t.Run("query", func(t *testing.T) {
		found := jsonLines[consumedMessage](t, cli(t, ctx, c, "query", "--key", "rare-key", "-t", topic, "--json"))
		if len(found) != 5 {
			t.Fatalf("query --key rare-key: %d messages, want 5", len(found))
		}
		for _, m := range found {
			if _, ok := byID[m.MsgID]; !ok || m.Body != producedBody(m.MsgID, size) {
				t.Fatalf("query --key returned %s, not a produced message with its body", m.MsgID)
			}
		}
		id := acks[700].msgID
		found = jsonLines[consumedMessage](t, cli(t, ctx, c, "query", "--msg-id", id, "--json"))
		if len(found) != 1 || found[0].MsgID != id || found[0].PhysicalOffset != byID[id].PhysicalOffset {
			t.Fatalf("query --msg-id %s: %+v", id, found)
		}
		r := runCLI(t, ctx, c.Bin, c.APIAddrs(), "query", "--msg-id", "no-such-id")
		if r.code != 1 || !strings.Contains(strings.ToLower(r.stderr), "no message") {
			t.Fatalf("query of an unknown id: exit %d, stderr %q; want 1 and a not-found message", r.code, r.stderr)
		}
	})

	t.Run("group", func(t *testing.T) {
		first := jsonLines[consumedMessage](t, cli(t, ctx, c, "consume", "-t", topic, "--group", "g1", "-n", "600", "--json"))
		rest := jsonLines[consumedMessage](t, cli(t, ctx, c, "consume", "-t", topic, "--group", "g1", "--to-end", "--json"))
		if len(first) != 600 {
			t.Fatalf("first group consume: %d messages, want 600", len(first))
		}
		checkConsumedOnce(t, append(first, rest...), acks, topic, size)
		again := jsonLines[consumedMessage](t, cli(t, ctx, c, "consume", "-t", topic, "--group", "g1", "--to-end", "--json"))
		if len(again) != 0 {
			t.Fatalf("group consumed to the end still re-reads %d messages", len(again))
		}
	})

	t.Run("cluster", func(t *testing.T) { testClusterStatusTransfer(t, ctx, c) })

	out = cli(t, ctx, c, "topic", "delete", topic, "--json")
	if !strings.Contains(out, `"deleted":true`) {
		t.Fatalf("topic delete: %s", out)
	}
	r := runCLI(t, ctx, c.Bin, c.APIAddrs(), "topic", "describe", topic)
	if r.code != 1 || !strings.Contains(r.stderr, "does not exist") {
		t.Fatalf("describe of a deleted topic: exit %d stderr %q, want 1 and 'does not exist'", r.code, r.stderr)
	}
	if r := runCLI(t, ctx, c.Bin, c.APIAddrs(), "produce", "-n", "1"); r.code != 2 {
		t.Fatalf("produce without -t: exit %d, want 2 (usage)", r.code)
	}
}

// checkConsumedOnce checks that msgs hold every acknowledged message exactly
// once, at the acknowledged queue and offset, with the produced body, and
// nothing else. It returns the messages by id.
func checkConsumedOnce(t *testing.T, msgs []consumedMessage, acks []ack, topic string, size int) map[string]consumedMessage {
	t.Helper()
	byID := make(map[string]consumedMessage, len(msgs))
	for _, m := range msgs {
		if _, dup := byID[m.MsgID]; dup {
			t.Fatalf("message %s consumed twice", m.MsgID)
		}
		byID[m.MsgID] = m
	}
	for _, a := range acks {
		m, ok := byID[a.msgID]
		if !ok {
			t.Fatalf("acknowledged message %s (queue %s offset %s) not consumed", a.msgID, a.queue, a.offset)
		}
		at := fmt.Sprintf("%d/%d", m.QueueID, m.QueueOffset)
		if m.Topic != topic || at != a.queue+"/"+a.offset {
			t.Fatalf("message %s consumed from %s at %s, acknowledged at %s/%s", a.msgID, m.Topic, at, a.queue, a.offset)
		}
		if m.BodyEncoding != "" || m.Body != producedBody(a.msgID, size) {
			t.Fatalf("message %s: body %.40q (encoding %q) is not the produced one", a.msgID, m.Body, m.BodyEncoding)
		}
	}
	if len(byID) != len(acks) {
		t.Fatalf("consumed %d distinct messages, acknowledged %d", len(byID), len(acks))
	}
	return byID
}

type statusOut struct {
	LeaderID string `json:"leaderId"`
	Members  []struct {
		ID       string `json:"id"`
		Suffrage string `json:"suffrage"`
	} `json:"members"`
}

// testClusterStatusTransfer checks `cluster status` against the nodes' own
// view, moves leadership to a named follower and then to any other voter.
func testClusterStatusTransfer(t *testing.T, ctx context.Context, c *nodeproc.Cluster) {
	lead, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sts := jsonLines[statusOut](t, cli(t, ctx, c, "cluster", "status", "--json"))
	if len(sts) != 1 || sts[0].LeaderID != c.Nodes[lead].Spec().ID || len(sts[0].Members) != 3 {
		t.Fatalf("cluster status %+v; leader is %s", sts, c.Nodes[lead].Spec().ID)
	}
	for _, m := range sts[0].Members {
		if !strings.EqualFold(m.Suffrage, "voter") {
			t.Fatalf("member %s is %s, want Voter", m.ID, m.Suffrage)
		}
	}
	// A bootstrapped follower's API address is known only once it has led
	// (node/doc.go), so only the leader's row must be reachable.
	text := cli(t, ctx, c, "cluster", "status")
	for _, p := range c.Nodes {
		row := ""
		for _, line := range strings.Split(text, "\n") {
			if strings.HasPrefix(line, p.Spec().ID+" ") {
				row = line
			}
		}
		if row == "" || (p == c.Nodes[lead] && !strings.Contains(row, "Leader")) {
			t.Fatalf("cluster status text: row of %s is %q:\n%s", p.Spec().ID, row, text)
		}
	}

	target := c.Nodes[(lead+1)%3].Spec().ID
	old := c.Nodes[lead].Spec().ID
	if out := cli(t, ctx, c, "cluster", "transfer", target); !strings.Contains(out, "transferred from "+old+" to "+target) {
		t.Fatalf("transfer %s: %q, want it to name %s and %s", target, out, old, target)
	}
	waitLeader(t, ctx, c, func(id string) bool { return id == target }, "transfer to "+target)
	// Asking for the leader it already has changes nothing and says so.
	if out := cli(t, ctx, c, "cluster", "transfer", target); !strings.Contains(out, target+" already leads") {
		t.Fatalf("transfer to the leader %s: %q", target, out)
	}
	var tr struct {
		From, To      string
		AlreadyLeader bool
	}
	if err := json.Unmarshal([]byte(cli(t, ctx, c, "--json", "cluster", "transfer")), &tr); err != nil ||
		tr.From != target || tr.To == target || tr.To == "" || tr.AlreadyLeader {
		t.Fatalf("transfer away from %s: %+v (%v)", target, tr, err)
	}
	waitLeader(t, ctx, c, func(id string) bool { return id != target }, "transfer away from "+target)
}

// waitLeader polls until the agreed leader satisfies ok.
func waitLeader(t *testing.T, ctx context.Context, c *nodeproc.Cluster, ok func(string) bool, what string) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	err := pollUntil(wctx, func() error {
		i, err := c.Leader(wctx)
		if err != nil {
			return err
		}
		if id := c.Nodes[i].Spec().ID; !ok(id) {
			return fmt.Errorf("leader is %s", id)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
