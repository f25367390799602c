package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/nodeproc"
	"github.com/raftmq/raftmq/recovery"
)

// sendLog records the fate of every message the producers tried.
type sendLog struct {
	mu      sync.Mutex
	acked   map[string]client.SendResult
	unknown map[string]bool
	failed  map[string]error // nothing stored, by the client's contract
	ackedN  atomic.Int64
}

func newSendLog() *sendLog {
	return &sendLog{acked: map[string]client.SendResult{}, unknown: map[string]bool{}, failed: map[string]error{}}
}

func (l *sendLog) record(ids []string, res []client.SendResult, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, id := range ids {
		switch {
		case err == nil && res[i].Err == nil:
			l.acked[id] = res[i]
			l.ackedN.Add(1)
		case err == nil:
			l.failed[id] = res[i].Err
		case client.IsOutcomeUnknown(err):
			l.unknown[id] = true
		default:
			l.failed[id] = err
		}
	}
}

// produceUntil sends batches of 8 from workers until stop is closed.
func produceUntil(ctx context.Context, cl *client.Client, topic string, workers int, stop <-chan struct{}, log *sendLog) *sync.WaitGroup {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-ctx.Done():
					return
				default:
				}
				msgs := make([]client.Message, 8)
				ids := make([]string, len(msgs))
				for j := range msgs {
					ids[j] = cl.NewMsgID()
					msgs[j] = client.NewMessage(topic, []byte(fmt.Sprintf("%s worker %d batch %d", ids[j], w, i))).WithID(ids[j])
				}
				sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				res, err := cl.Send(sctx, msgs...)
				cancel()
				log.record(ids, res, err)
			}
		})
	}
	return &wg
}

// waitAcked waits until at least n messages were acknowledged.
func waitAcked(t *testing.T, ctx context.Context, log *sendLog, n int64, what string) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := pollUntil(wctx, func() error {
		if got := log.ackedN.Load(); got < n {
			return fmt.Errorf("%d acknowledged", got)
		}
		return nil
	}); err != nil {
		t.Fatalf("%s: want %d acknowledged: %v", what, n, err)
	}
}

// TestLeaderKillWhileProducing kills the leader with SIGKILL while a Go
// client produces from four goroutines. The client must follow the new
// leader (acknowledgements continue), and after the killed node restarts
// and catches up: every acknowledged send is stored exactly once with its
// body, every send of unknown outcome at most once, no refused send at all
// — on every node. After a graceful stop (exit 0, abort files removed),
// `raftmq verify` finds the three data dirs consistent and byte-identical.
func TestLeaderKillWhileProducing(t *testing.T) {
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const topic = "e2e-kill"
	cl := newClient(t, ctx, c, client.Options{RetryTimeout: 30 * time.Second, Backoff: 20 * time.Millisecond})
	if err := cl.CreateTopic(ctx, topic, 4); err != nil {
		t.Fatal(err)
	}

	log := newSendLog()
	stop := make(chan struct{})
	wg := produceUntil(ctx, cl, topic, 4, stop, log)
	waitAcked(t, ctx, log, 400, "before the kill")
	old, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Nodes[old].Kill(); err != nil {
		t.Fatal(err)
	}
	killedAt := log.ackedN.Load()
	t.Logf("killed leader %s after %d acknowledged sends", c.Nodes[old].Spec().ID, killedAt)
	waitAcked(t, ctx, log, killedAt+800, "after the kill (the client must follow the new leader)")
	close(stop)
	wg.Wait()
	newLead, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("new leader %s; %d acknowledged, %d unknown, %d failed", c.Nodes[newLead].Spec().ID,
		len(log.acked), len(log.unknown), len(log.failed))
	for id, err := range log.failed {
		if !errors.Is(err, client.ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("send %s failed with %v: neither unavailable nor unknown", id, err)
		}
	}

	if err := c.Nodes[old].Restart(); err != nil {
		t.Fatal(err)
	}
	waitCaughtUp(t, ctx, c, old, newLead)
	for i, p := range c.Nodes {
		stored := readAll(t, ctx, p, topic)
		checkSendLog(t, p.Spec().ID, stored, log)
		if i == 0 {
			t.Logf("each node stores %d messages of %s", len(stored), topic)
		}
	}

	if err := c.Stop(ctx); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	for _, d := range c.Dirs() {
		if _, err := os.Stat(filepath.Join(d, "store", recovery.AbortName)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("abort file in %s after a graceful stop: %v", d, err)
		}
	}
	r := runCLI(t, ctx, c.Bin, nil, append([]string{"verify"}, c.Dirs()...)...)
	if r.code != 0 || !strings.Contains(r.stdout, "OK") {
		t.Fatalf("raftmq verify: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// waitCaughtUp waits until the restarted node has applied everything the
// leader has committed and holds the same commitlog.
func waitCaughtUp(t *testing.T, ctx context.Context, c *nodeproc.Cluster, node, leader int) {
	t.Helper()
	if err := c.Nodes[node].WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	lst, err := c.Nodes[leader].Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := pollUntil(wctx, func() error {
		st, err := c.Nodes[node].Status(wctx)
		if err != nil {
			return err
		}
		if st.AppliedIndex < lst.CommitIndex || st.MaxOffset < lst.MaxOffset {
			return fmt.Errorf("applied %d maxOffset %d, leader committed %d maxOffset %d",
				st.AppliedIndex, st.MaxOffset, lst.CommitIndex, lst.MaxOffset)
		}
		return nil
	}); err != nil {
		t.Fatalf("restarted node did not catch up: %v", err)
	}
}

// readAll pulls every queue of topic from one node (its own store).
func readAll(t *testing.T, ctx context.Context, p *nodeproc.Proc, topic string) []client.ReceivedMessage {
	t.Helper()
	cl, err := client.New(ctx, []string{p.Spec().APIAddr}, client.Options{ReadFromAny: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	info, err := cl.DescribeTopic(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var out []client.ReceivedMessage
	for _, q := range info.Offsets {
		for off := q.Min; off < q.Max; {
			r, err := cl.Pull(ctx, client.PullRequest{Topic: topic, QueueID: q.QueueID, Offset: off, MaxMessages: 256})
			if err != nil {
				t.Fatalf("node %s pull %s/%d@%d: %v", p.Spec().ID, topic, q.QueueID, off, err)
			}
			if len(r.Messages) == 0 {
				t.Fatalf("node %s: pull %s/%d@%d below max %d returned %v and no messages", p.Spec().ID, topic, q.QueueID, off, q.Max, r.Status)
			}
			out = append(out, r.Messages...)
			off = r.NextOffset
		}
	}
	return out
}

// checkSendLog: acknowledged exactly once at the acknowledged position with
// the sent body, unknown at most once, refused never, nothing unsent.
func checkSendLog(t *testing.T, node string, stored []client.ReceivedMessage, log *sendLog) {
	t.Helper()
	count := map[string]int{}
	for _, m := range stored {
		count[m.MsgID]++
		if !strings.HasPrefix(string(m.Body), m.MsgID+" worker ") {
			t.Fatalf("node %s: message %s has body %.60q, not the one sent", node, m.MsgID, m.Body)
		}
		if a, ok := log.acked[m.MsgID]; ok && (a.QueueID != m.QueueID || a.QueueOffset != m.QueueOffset || a.PhysicalOffset != m.PhysicalOffset) {
			t.Fatalf("node %s: message %s stored at %d/%d (phy %d), acknowledged at %d/%d (phy %d)", node, m.MsgID,
				m.QueueID, m.QueueOffset, m.PhysicalOffset, a.QueueID, a.QueueOffset, a.PhysicalOffset)
		}
	}
	for id := range log.acked {
		if count[id] != 1 {
			t.Fatalf("node %s: acknowledged message %s stored %d times", node, id, count[id])
		}
	}
	for id, n := range count {
		_, acked := log.acked[id]
		switch {
		case log.unknown[id] && n > 1:
			t.Fatalf("node %s: message %s of unknown outcome stored %d times", node, id, n)
		case log.failed[id] != nil:
			t.Fatalf("node %s: message %s stored although its send failed: %v", node, id, log.failed[id])
		case !acked && !log.unknown[id]:
			t.Fatalf("node %s: message %s stored but never sent", node, id)
		}
	}
}
