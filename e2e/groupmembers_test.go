package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/nodeproc"
)

// lockedBuffer is a process output stream the test reads while it runs.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// member is a `raftmq consume --group` process.
type member struct {
	name           string
	cmd            *exec.Cmd
	stdout, stderr *lockedBuffer
	exited         chan error
}

func startMember(t *testing.T, ctx context.Context, c *nodeproc.Cluster, name string, args ...string) *member {
	t.Helper()
	args = append([]string{"--server", strings.Join(c.APIAddrs(), ",")}, args...)
	m := &member{name: name, cmd: exec.CommandContext(ctx, c.Bin.CLI, args...), stdout: &lockedBuffer{}, stderr: &lockedBuffer{},
		exited: make(chan error, 1)}
	m.cmd.Stdout, m.cmd.Stderr = m.stdout, m.stderr
	m.cmd.WaitDelay = 5 * time.Second
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { m.exited <- m.cmd.Wait() }()
	t.Cleanup(func() {
		_ = m.cmd.Process.Kill()
		<-m.exited
	})
	return m
}

// stop sends SIGTERM and waits for a clean exit (it leaves its group).
func (m *member) stop(t *testing.T) {
	t.Helper()
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("%s: %v", m.name, err)
	}
	select {
	case err := <-m.exited:
		m.exited <- err // for the cleanup
		if err != nil {
			t.Fatalf("%s exited with %v; stderr:\n%s", m.name, err, m.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not exit after SIGTERM", m.name)
	}
}

// consumed parses the member's --json lines so far (complete lines only).
func (m *member) consumed(t *testing.T) []consumedMessage {
	out := m.stdout.String()
	if i := strings.LastIndexByte(out, '\n'); i >= 0 {
		return jsonLines[consumedMessage](t, out[:i+1])
	}
	return nil
}

// holds reports whether the member's last rebalance line says it holds
// queues with the group at n members.
func (m *member) holds(n int) bool {
	lines := strings.Split(strings.TrimSpace(m.stderr.String()), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], " members, this one (") {
			return strings.Contains(lines[i], fmt.Sprintf(": %d members,", n))
		}
	}
	return false
}

// TestGroupMembersSplitQueues: `raftmq consume --group g` run twice splits
// the topic's queues: each process reads a disjoint, non-empty set and
// together every message, once; when one leaves, the other takes its
// queues over from the committed offsets and gets what is sent next.
func TestGroupMembersSplitQueues(t *testing.T) {
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const topic, group = "e2e-members", "e2e-members-group"
	cli(t, ctx, c, "topic", "create", topic, "--queues", "8")
	args := []string{"consume", "-t", topic, "--group", group, "--json", "--wait", "500ms"}
	one := startMember(t, ctx, c, "member one", args...)
	if err := waitFor(ctx, "member one to hold the queues alone", func() bool { return one.holds(1) }); err != nil {
		t.Fatalf("%v; stderr:\n%s", err, one.stderr.String())
	}
	two := startMember(t, ctx, c, "member two", args...)
	if err := waitFor(ctx, "both members to see the group at 2", func() bool { return one.holds(2) && two.holds(2) }); err != nil {
		t.Fatalf("%v; stderr one:\n%s\nstderr two:\n%s", err, one.stderr.String(), two.stderr.String())
	}
	if d := describeGroup(t, ctx, c, group, topic); !d.MembersTracked || len(d.Members) != 2 {
		t.Fatalf("group describe with both members running: members %v (tracked %v)", d.Members, d.MembersTracked)
	}
	cli(t, ctx, c, "produce", "-t", topic, "-n", "800", "-s", "32")
	if err := waitFor(ctx, "800 messages between the two", func() bool { return len(one.consumed(t))+len(two.consumed(t)) >= 800 }); err != nil {
		t.Fatal(err)
	}
	queues := map[string]map[int32]bool{}
	seen := map[string]string{}
	for _, m := range []*member{one, two} {
		queues[m.name] = map[int32]bool{}
		for _, msg := range m.consumed(t) {
			if other, dup := seen[msg.MsgID]; dup {
				t.Fatalf("%s reached both %s and %s", msg.MsgID, other, m.name)
			}
			seen[msg.MsgID] = m.name
			queues[m.name][msg.QueueID] = true
		}
	}
	q1, q2 := slices.Sorted(maps.Keys(queues[one.name])), slices.Sorted(maps.Keys(queues[two.name]))
	if len(seen) != 800 || len(q1) == 0 || len(q2) == 0 || len(q1)+len(q2) != 8 {
		t.Fatalf("%d distinct messages; member one read queues %v, member two %v", len(seen), q1, q2)
	}
	for _, q := range q1 {
		if slices.Contains(q2, q) {
			t.Fatalf("queue %d read by both members (one %v, two %v)", q, q1, q2)
		}
	}
	t.Logf("member one read queues %v, member two %v: 800 messages, each once", q1, q2)

	one.stop(t)
	if err := waitFor(ctx, "member two to hold every queue", func() bool { return two.holds(1) }); err != nil {
		t.Fatalf("%v; stderr:\n%s", err, two.stderr.String())
	}
	before := len(two.consumed(t))
	cli(t, ctx, c, "produce", "-t", topic, "-n", "200", "-s", "32")
	if err := waitFor(ctx, "member two to get the next 200", func() bool { return len(two.consumed(t)) >= before+200 }); err != nil {
		t.Fatal(err)
	}
	for _, msg := range two.consumed(t)[before:] {
		if seen[msg.MsgID] != "" {
			t.Fatalf("after member one left, member two read %s again (read by %s before)", msg.MsgID, seen[msg.MsgID])
		}
	}
	two.stop(t)
}
