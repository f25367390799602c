package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/fsm"
	"github.com/raftmq/raftmq/internal/testseed"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/transport"
)

// TestSplitBoundsParts: split keeps the messages in order, and every part
// holds at most max_bytes and max_messages, or is one larger message.
func TestSplitBoundsParts(t *testing.T) {
	rng := rand.New(rand.NewPCG(uint64(testseed.Seed(t)), 21))
	cfg := DefaultConfig()
	cfg.GroupCommit.MaxBytes, cfg.GroupCommit.MaxMessages = 64<<10, 16
	b := newBatcher(&Node{cfg: cfg})
	for round := range 200 {
		msgs := make([]message.Message, 1+rng.IntN(100))
		for i := range msgs {
			size := rng.IntN(8 << 10)
			if rng.IntN(10) == 0 {
				size = rng.IntN(200 << 10) // larger than a whole entry
			}
			msgs[i] = message.Message{Topic: "T", Body: make([]byte, size)}
		}
		parts := b.split(msgs)
		i := 0
		for _, p := range parts {
			bytes := 0
			for j := range p {
				if &p[j] != &msgs[i] {
					t.Fatalf("round %d: part message %d is not message %d of the send", round, j, i)
				}
				bytes += msgBytes(&p[j])
				i++
			}
			if len(p) == 0 || len(p) > cfg.GroupCommit.MaxMessages || (len(p) > 1 && bytes > cfg.GroupCommit.MaxBytes) {
				t.Fatalf("round %d: part of %d messages, %d bytes: bounds are %d messages, %d bytes",
					round, len(p), bytes, cfg.GroupCommit.MaxMessages, cfg.GroupCommit.MaxBytes)
			}
		}
		if i != len(msgs) {
			t.Fatalf("round %d: parts hold %d of %d messages", round, i, len(msgs))
		}
	}
	one := []message.Message{{Topic: "T", Body: []byte("x")}}
	if parts := b.split(one); len(parts) != 1 || len(parts[0]) != 1 {
		t.Fatalf("a small send is split: %d parts", len(parts))
	}
}

// TestSplitSendWithdrawnOnDeadline: a split Send none of whose parts was
// proposed gets its deadline error (nothing stored) and leaves nothing
// counted in the queue.
func TestSplitSendWithdrawnOnDeadline(t *testing.T) {
	cfg := DefaultConfig()
	cfg.GroupCommit.MaxBytes, cfg.GroupCommit.MaxQueueBytes = 1<<10, 1<<20
	b := newBatcher(&Node{cfg: cfg, stop: make(chan struct{})})
	b.inFlight = b.g.MaxInFlight // nothing may be proposed
	msgs := make([]message.Message, 8)
	for i := range msgs {
		msgs[i] = message.Message{Topic: "T", Body: make([]byte, 900)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := b.send(ctx, msgs)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("split send that was never proposed: %v, want the deadline", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.qMsgs != 0 || b.qBytes != 0 {
		t.Fatalf("withdrawn parts still counted: %d messages, %d bytes", b.qMsgs, b.qBytes)
	}
	if batch, _, _ := b.take(); len(batch) != 0 {
		t.Fatalf("withdrawn parts taken into an entry: %d requests", len(batch))
	}
}

// TestSplitSendDropsPartsAfterFailure: once a part of a split Send failed,
// the batcher proposes none of its later parts; they are answered with
// errPartDropped and uncounted.
func TestSplitSendDropsPartsAfterFailure(t *testing.T) {
	cfg := DefaultConfig()
	b := newBatcher(&Node{cfg: cfg, stop: make(chan struct{})})
	g := &sendGroup{}
	one := []message.Message{{Topic: "T", Body: []byte("x")}}
	reqs := []*sendReq{newSendReq(one, time.Now(), g), newSendReq(one, time.Now(), g), newSendReq(one, time.Now(), nil)}
	for _, r := range reqs {
		r.done = make(chan sendResult, 1)
	}
	b.inFlight = b.g.MaxInFlight
	if err := b.enqueue(context.Background(), reqs[:2]); err != nil {
		t.Fatal(err)
	}
	if err := b.enqueue(context.Background(), reqs[2:]); err != nil {
		t.Fatal(err)
	}
	g.failed.Store(true)
	b.mu.Lock()
	batch, count, _ := b.take()
	b.mu.Unlock()
	if len(batch) != 1 || batch[0] != reqs[2] || count != 1 {
		t.Fatalf("took %d requests (%d messages), want only the unsplit one", len(batch), count)
	}
	for i, r := range reqs[:2] {
		if res := <-r.done; !errors.Is(res.err, errPartDropped) {
			t.Fatalf("part %d of the failed send: %v, want errPartDropped", i, res.err)
		}
	}
	if b.qMsgs != 0 || b.qBytes != 0 {
		t.Fatalf("queue still counts %d messages, %d bytes", b.qMsgs, b.qBytes)
	}
}

// bigMsgs are n messages of size bytes whose bodies start with prefix and
// their index.
func bigMsgs(rng *rand.Rand, prefix string, n, size int) []message.Message {
	out := make([]message.Message, n)
	for i := range out {
		body := make([]byte, size)
		for j := range body {
			body[j] = byte('a' + rng.IntN(26))
		}
		copy(body, fmt.Sprintf("%s-%03d-", prefix, i))
		out[i] = message.Message{Topic: "Big", QueueID: int32(i % 2), BornTimestamp: 1, Body: body}
	}
	return out
}

// TestSplitSendBoundsEntries: on a real three-node cluster, Sends much
// larger than group_commit.max_bytes (16 × 900 KB, and 64 × 100 KB beside
// concurrent small sends) are stored once each, in the order of the
// request, in Raft entries none of which exceeds max_bytes by more than one
// message, and the replicas end byte-identical.
func TestSplitSendBoundsEntries(t *testing.T) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(uint64(seed), 22))
	const maxBytes = 1 << 20
	c := startClusterWith(t, 3, func(cfg *Config) {
		// The test is about entry sizes, not failover: timeouts the race
		// detector on a loaded machine does not trip while megabytes go
		// to each follower (CI saw 400+ ms heartbeats and a leader step
		// down with the defaults). A leader change that comes anyway is
		// followed by sendToLeader.
		cfg.Raft.HeartbeatTimeout, cfg.Raft.ElectionTimeout, cfg.Raft.LeaderLeaseTimeout = 2*time.Second, 2*time.Second, 1500*time.Millisecond
		cfg.GroupCommit.MaxBytes = maxBytes
		cfg.Store.MaxMessageSize = 1 << 20
		cfg.Store.CommitLogFileSize = 8 << 20
	})
	sends := [][]message.Message{bigMsgs(rng, "huge", 16, 900_000), bigMsgs(rng, "wide", 64, 100_000)}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	smallErr := make(chan error, 1)
	wg.Add(1)
	go func() { // small sends interleave with the parts
		defer wg.Done()
		for i := range 50 {
			if _, err := c.sendToLeader(ctx, msgs("Small", fmt.Sprintf("s%d", i), 3)); err != nil {
				smallErr <- err
				return
			}
		}
	}()
	results := make([][]store.PutResult, len(sends))
	for i, s := range sends {
		res, err := c.sendToLeader(ctx, s)
		if err != nil {
			t.Fatalf("seed %d: send %d of %d messages: %v", seed, i, len(s), err)
		}
		results[i] = res
	}
	wg.Wait()
	select {
	case err := <-smallErr:
		t.Fatalf("small send: %v", err)
	default:
	}
	for i, s := range sends {
		checkSplitResults(t, s, results[i])
	}
	c.assertIdentical()
	for _, n := range c.nodes {
		checkEntryBounds(t, n, maxBytes, 1<<20)
		for i, s := range sends {
			for j, r := range results[i] {
				m, err := n.Store().LookupByOffset(r.PhysicalOffset)
				if err != nil || !bytes.Equal(m.Body, s[j].Body) {
					t.Fatalf("node %s: send %d message %d at %d: %v (body equal: %v)", n.cfg.ID, i, j, r.PhysicalOffset, err, err == nil && bytes.Equal(m.Body, s[j].Body))
				}
			}
		}
	}
}

// sendToLeader sends ms to the current leader, and again (all of it) to the
// next one while the answer says leadership moved: a split send cut short
// may have stored some parts, which then sit in the log twice, each copy
// whole; the results are the last send's.
func (c *cluster) sendToLeader(ctx context.Context, ms []message.Message) ([]store.PutResult, error) {
	for try := 0; ; try++ {
		l := c.readyLeader(ctx)
		if l == nil {
			return nil, fmt.Errorf("no ready leader: %w", ctx.Err())
		}
		res, err := l.Send(ctx, ms)
		moved := errors.Is(err, transport.ErrNotLeader) || errors.Is(err, transport.ErrOutcomeUnknown)
		if !moved || try == 3 || ctx.Err() != nil {
			return res, err
		}
		c.t.Logf("send of %d messages to %s: %v; again to the leader", len(ms), l.cfg.ID, err)
	}
}

// checkSplitResults: one result per message, in the order of the request
// (queue offsets and physical offsets rise), each a stored message.
func checkSplitResults(t *testing.T, sent []message.Message, res []store.PutResult) {
	t.Helper()
	if len(res) != len(sent) {
		t.Fatalf("%d results for %d messages", len(res), len(sent))
	}
	lastQ := map[int32]int64{}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("message %d: %v", i, r.Err)
		}
		if q, ok := lastQ[r.QueueID]; ok && r.QueueOffset <= q {
			t.Fatalf("message %d: queue %d offset %d after %d: results out of order", i, r.QueueID, r.QueueOffset, q)
		}
		lastQ[r.QueueID] = r.QueueOffset
		if i > 0 && r.PhysicalOffset <= res[i-1].PhysicalOffset {
			t.Fatalf("message %d at %d after %d: not in the order of the request", i, r.PhysicalOffset, res[i-1].PhysicalOffset)
		}
		if r.QueueID != sent[i].QueueID {
			t.Fatalf("message %d in queue %d, sent to %d", i, r.QueueID, sent[i].QueueID)
		}
	}
}

// checkEntryBounds reads every entry of n's Raft log: each MessageBatch
// entry must hold at most maxBytes of messages, or one message (of at most
// maxMsg bytes) more than that, and every test body is stored once.
func checkEntryBounds(t *testing.T, n *Node, maxBytes, maxMsg int) {
	t.Helper()
	first, err := n.bolt.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	last, err := n.bolt.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	batches, biggest := 0, 0
	for i := max(first, 1); i <= last; i++ {
		var e raft.Log
		if err := n.bolt.GetLog(i, &e); err != nil {
			t.Fatalf("node %s: entry %d: %v", n.cfg.ID, i, err)
		}
		if e.Type != raft.LogCommand {
			continue
		}
		cmd, err := fsm.DecodeCommand(e.Data)
		if err != nil {
			t.Fatalf("node %s: entry %d: %v", n.cfg.ID, i, err)
		}
		if cmd.Type != fsm.CmdMessageBatch {
			continue
		}
		batches++
		biggest = max(biggest, len(e.Data))
		sum, largest := 0, 0
		for j := range cmd.Messages {
			mb := msgBytes(&cmd.Messages[j])
			sum += mb
			largest = max(largest, mb)
			if b := cmd.Messages[j].Body; len(b) >= 9 {
				seen[string(b[:9])]++
			}
		}
		if len(cmd.Messages) > 1 && sum > maxBytes+largest || largest > maxMsg+1024 {
			t.Fatalf("node %s: entry %d holds %d messages, %d bytes (%d encoded): more than max_bytes %d plus one message",
				n.cfg.ID, i, len(cmd.Messages), sum, len(e.Data), maxBytes)
		}
		if len(e.Data) > maxBytes+maxMsg+64<<10 {
			t.Fatalf("node %s: entry %d is %d bytes encoded", n.cfg.ID, i, len(e.Data))
		}
	}
	ours := 0
	for k, v := range seen {
		if k[:4] != "huge" && k[:4] != "wide" {
			continue
		}
		ours++
		if v != 1 {
			t.Fatalf("node %s: message %q stored %d times", n.cfg.ID, k, v)
		}
	}
	if ours != 80 {
		t.Fatalf("node %s: %d test messages in the Raft log [%d, %d], want 80", n.cfg.ID, ours, first, last)
	}
	t.Logf("node %s: %d message entries in the log, the largest %d bytes", n.cfg.ID, batches, biggest)
}
