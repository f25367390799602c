package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/nodeproc"
)

// groupDescribeJSON is `group describe --json`.
type groupDescribeJSON struct {
	Group  string `json:"group"`
	Queues []struct {
		Topic     string `json:"topic"`
		QueueID   int32  `json:"queueId"`
		Committed *int64 `json:"committedOffset"`
		MinOffset int64  `json:"minOffset"`
		MaxOffset int64  `json:"maxOffset"`
		Lag       int64  `json:"lag"`
	} `json:"queues"`
	Lag            int64    `json:"lag"`
	Members        []string `json:"members"`
	MembersTracked bool     `json:"membersTracked"`
}

// produceAcked produces n messages with --ack-log and returns the acks.
func produceAcked(t *testing.T, ctx context.Context, c *nodeproc.Cluster, topic string, n int) []ack {
	t.Helper()
	path := filepath.Join(t.TempDir(), "acks.tsv")
	cli(t, ctx, c, "produce", "-t", topic, "-n", strconv.Itoa(n), "-s", "64", "--ack-log", path, "--quiet")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	acks := readAckLog(t, string(data))
	if len(acks) != n {
		t.Fatalf("%d acks, want %d", len(acks), n)
	}
	return acks
}

// perQueue counts acks per queue id.
func perQueue(t *testing.T, acks []ack) map[int32]int64 {
	t.Helper()
	out := map[int32]int64{}
	for _, a := range acks {
		q, err := strconv.Atoi(a.queue)
		if err != nil {
			t.Fatalf("ack %+v: unknown outcome or bad queue (no faults were injected)", a)
		}
		out[int32(q)]++
	}
	return out
}

var lagLine = regexp.MustCompile(`^raftmq_group_lag_messages\{([^}]*)\} (\S+)$`)

// scrapeLag reads raftmq_group_lag_messages of group from a node's
// /metrics: lag by "topic/queue".
func scrapeLag(ctx context.Context, p *nodeproc.Proc, group string) (map[string]int64, error) {
	body, err := p.Get(ctx, "/metrics")
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, line := range strings.Split(string(body), "\n") {
		m := lagLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		labels := map[string]string{}
		for _, kv := range strings.Split(m[1], ",") {
			k, v, _ := strings.Cut(kv, "=")
			labels[k] = strings.Trim(v, `"`)
		}
		if labels["group"] != group {
			continue
		}
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %w", line, err)
		}
		out[labels["topic"]+"/"+labels["queue"]] = int64(v)
	}
	return out, nil
}

// describeGroup runs `group describe G -t T --json`.
func describeGroup(t *testing.T, ctx context.Context, c *nodeproc.Cluster, group, topic string) groupDescribeJSON {
	t.Helper()
	ds := jsonLines[groupDescribeJSON](t, cli(t, ctx, c, "group", "describe", group, "-t", topic, "--json"))
	if len(ds) != 1 || ds[0].Group != group {
		t.Fatalf("group describe %s --json: %+v", group, ds)
	}
	return ds[0]
}

// checkLagMetrics waits until every node's raftmq_group_lag_messages of
// group equals the lag `group describe` reported (followers apply a little
// later than the leader).
func checkLagMetrics(t *testing.T, ctx context.Context, c *nodeproc.Cluster, d groupDescribeJSON) {
	t.Helper()
	want := map[string]int64{}
	for _, q := range d.Queues {
		want[fmt.Sprintf("%s/%d", q.Topic, q.QueueID)] = q.Lag
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, p := range c.Nodes {
		err := pollUntil(wctx, func() error {
			got, err := scrapeLag(wctx, p, d.Group)
			if err != nil {
				return err
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				return fmt.Errorf("node %s: raftmq_group_lag_messages %v, group describe says %v", p.Spec().ID, got, want)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// consumeGroup runs `consume -t T --group G --to-end --json`.
func consumeGroup(t *testing.T, ctx context.Context, c *nodeproc.Cluster, topic, group string) []consumedMessage {
	t.Helper()
	return jsonLines[consumedMessage](t, cli(t, ctx, c, "consume", "-t", topic, "--group", group, "--to-end", "--json", "--quiet"))
}

// firstOffsets is the lowest queue offset consumed per queue, and the
// number of messages.
func firstOffsets(msgs []consumedMessage) map[int32]int64 {
	out := map[int32]int64{}
	for _, m := range msgs {
		if o, ok := out[m.QueueID]; !ok || m.QueueOffset < o {
			out[m.QueueID] = m.QueueOffset
		}
	}
	return out
}

// sameIDs reports whether msgs are exactly the acknowledged messages acks.
func sameIDs(msgs []consumedMessage, acks []ack) bool {
	got := make([]string, len(msgs))
	for i, m := range msgs {
		got[i] = m.MsgID
	}
	want := make([]string, len(acks))
	for i, a := range acks {
		want[i] = a.msgID
	}
	slices.Sort(got)
	slices.Sort(want)
	return slices.Equal(got, want)
}

// TestCLIGroups drives consumer groups through the raftmq binary against
// three real nodes: after a partial group consume, `group describe` shows
// committed, max and lag = produced - committed per queue, and every node's
// raftmq_group_lag_messages gauge agrees; `consume --from-time` starts at
// the first message stored at or after the time; `group reset` to the
// earliest, an offset, a time and the latest moves the group (backwards
// too) so that the next `consume --group` reads from there; bad usage
// exits 2 with a one-line reason.
func TestCLIGroups(t *testing.T) {
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	const topic, group, queues = "e2e-groups", "g1", 3
	cli(t, ctx, c, "topic", "create", topic, "--queues", strconv.Itoa(queues))
	acksA := produceAcked(t, ctx, c, topic, 300)
	countA := perQueue(t, acksA)

	part := jsonLines[consumedMessage](t, cli(t, ctx, c, "consume", "-t", topic, "--group", group, "-n", "100", "--json", "--quiet"))
	if len(part) != 100 {
		t.Fatalf("consume --group -n 100: %d messages", len(part))
	}
	committed := map[int32]int64{} // the offset after the last message consumed per queue
	for _, m := range part {
		committed[m.QueueID] = max(committed[m.QueueID], m.QueueOffset+1)
	}

	t.Run("describe and metrics", func(t *testing.T) {
		d := describeGroup(t, ctx, c, group, topic)
		if len(d.Queues) != queues || !d.MembersTracked || d.Members == nil || len(d.Members) != 0 {
			t.Fatalf("group describe: %+v", d)
		}
		var total int64
		for _, q := range d.Queues {
			wantLag := countA[q.QueueID]
			if off, ok := committed[q.QueueID]; ok {
				wantLag -= off
				if q.Committed == nil || *q.Committed != off {
					t.Fatalf("queue %d: committed %v, want %d", q.QueueID, q.Committed, off)
				}
			} else if q.Committed != nil {
				t.Fatalf("queue %d: committed %d, want none", q.QueueID, *q.Committed)
			}
			if q.MaxOffset != countA[q.QueueID] || q.Lag != wantLag {
				t.Fatalf("queue %d: max %d lag %d, want max %d (produced) lag %d (produced - committed)",
					q.QueueID, q.MaxOffset, q.Lag, countA[q.QueueID], wantLag)
			}
			total += q.Lag
		}
		if total != 200 || d.Lag != 200 {
			t.Fatalf("total lag %d (reported %d), want 300 produced - 100 consumed", total, d.Lag)
		}
		checkLagMetrics(t, ctx, c, d)

		text := cli(t, ctx, c, "group", "describe", group)
		if !strings.Contains(text, "total lag: 200") || !strings.Contains(text, "members: none live") {
			t.Fatalf("group describe (text):\n%s", text)
		}
		type listJSON struct {
			Group  string   `json:"group"`
			Topics []string `json:"topics"`
			Lag    int64    `json:"lag"`
		}
		list := jsonLines[listJSON](t, cli(t, ctx, c, "group", "list", "--json"))
		if len(list) != 1 || list[0].Group != group || list[0].Lag != 200 || !slices.Equal(list[0].Topics, []string{topic}) {
			t.Fatalf("group list --json: %+v", list)
		}
	})

	// Batch B is stored strictly after every message of A (the nodes run on
	// this machine's clock; the leader's store timestamps are monotonic).
	all := jsonLines[consumedMessage](t, cli(t, ctx, c, "consume", "-t", topic, "--to-end", "--json", "--quiet"))
	var lastA int64
	for _, m := range all {
		lastA = max(lastA, m.StoreTimestamp)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().UnixMilli() <= lastA && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if time.Now().UnixMilli() <= lastA {
		t.Fatalf("the clock did not pass batch A's last store timestamp %d", lastA)
	}
	acksB := produceAcked(t, ctx, c, topic, 90)
	countB := perQueue(t, acksB)
	tB := time.UnixMilli(lastA + 1).UTC().Format(time.RFC3339Nano)

	t.Run("consume from time", func(t *testing.T) {
		got := jsonLines[consumedMessage](t, cli(t, ctx, c, "consume", "-t", topic, "--from-time", tB, "--to-end", "--json", "--quiet"))
		if !sameIDs(got, acksB) {
			t.Fatalf("consume --from-time %s: %d messages, want exactly the %d of batch B", tB, len(got), len(acksB))
		}
		for q, off := range firstOffsets(got) {
			if off != countA[q] {
				t.Fatalf("consume --from-time: queue %d starts at %d, want %d (after batch A)", q, off, countA[q])
			}
		}
		// A time before everything starts at the min offsets: all of it.
		got = jsonLines[consumedMessage](t, cli(t, ctx, c, "consume", "-t", topic, "--from-time", "2000-01-01T00:00:00Z", "--to-end", "--json", "--quiet"))
		if len(got) != 390 {
			t.Fatalf("consume --from-time 2000: %d messages, want 390", len(got))
		}
	})

	t.Run("reset", func(t *testing.T) {
		cli(t, ctx, c, "group", "reset", group, "-t", topic, "--to-earliest")
		if got := consumeGroup(t, ctx, c, topic, group); !sameIDs(got, append(slices.Clone(acksA), acksB...)) {
			t.Fatalf("after reset --to-earliest: %d messages, want all 390", len(got))
		}

		// Backwards from the end to offset 50 (every queue holds more).
		cli(t, ctx, c, "group", "reset", group, "-t", topic, "--to-offset", "50")
		got := consumeGroup(t, ctx, c, topic, group)
		var want int64
		for q := range int32(queues) {
			want += countA[q] + countB[q] - 50
		}
		if int64(len(got)) != want {
			t.Fatalf("after reset --to-offset 50: %d messages, want %d", len(got), want)
		}
		for q, off := range firstOffsets(got) {
			if off != 50 {
				t.Fatalf("after reset --to-offset 50: queue %d starts at %d", q, off)
			}
		}

		cli(t, ctx, c, "group", "reset", group, "-t", topic, "--to-time", tB)
		if got := consumeGroup(t, ctx, c, topic, group); !sameIDs(got, acksB) {
			t.Fatalf("after reset --to-time %s: %d messages, want exactly the %d of batch B", tB, len(got), len(acksB))
		}

		cli(t, ctx, c, "group", "reset", group, "-t", topic, "--to-earliest")
		cli(t, ctx, c, "group", "reset", group, "-t", topic, "--to-latest")
		if got := consumeGroup(t, ctx, c, topic, group); len(got) != 0 {
			t.Fatalf("after reset --to-latest: %d messages, want none", len(got))
		}
		d := describeGroup(t, ctx, c, group, topic)
		if d.Lag != 0 {
			t.Fatalf("lag after reset --to-latest: %+v", d)
		}
		checkLagMetrics(t, ctx, c, d)
	})

	t.Run("bad usage", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"group", "reset", group, "-t", topic}, "give one of --to-time, --to-offset, --to-earliest, --to-latest"},
			{[]string{"group", "reset", group, "-t", topic, "--to-earliest", "--to-offset", "3"}, "--to-offset and --to-earliest exclude each other"},
			{[]string{"consume", "-t", topic, "--from-time", "last tuesday"}, "not an RFC3339 time"},
		} {
			r := runCLI(t, ctx, c.Bin, c.APIAddrs(), tc.args...)
			first, _, _ := strings.Cut(r.stderr, "\n")
			if r.code != 2 || r.stdout != "" || !strings.Contains(first, tc.want) {
				t.Errorf("raftmq %s: exit %d, stdout %q, stderr %q; want exit 2 and %q", strings.Join(tc.args, " "), r.code, r.stdout, r.stderr, tc.want)
			}
		}
		d := describeGroup(t, ctx, c, group, topic)
		if d.Lag != 0 {
			t.Fatalf("a refused reset changed the group: %+v", d)
		}
	})
}
