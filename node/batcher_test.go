package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/testseed"
	"github.com/raftmq/raftmq/message"
	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
	"github.com/raftmq/raftmq/transport"
	"github.com/raftmq/raftmq/wire"
)

// entryHist is the leader's raftmq_produce_entry_messages histogram:
// cumulative counts per upper bound.
type entryHist struct {
	bounds []float64
	counts []uint64 // cumulative, len(bounds)+1 (the last is +Inf: the total)
	sum    float64  // messages in all entries
}

func entryMessages(t *testing.T, n *Node) entryHist {
	t.Helper()
	if mf := gather(t, n)["raftmq_produce_entry_messages"]; mf != nil {
		h := mf.GetMetric()[0].GetHistogram()
		var e entryHist
		for _, b := range h.GetBucket() {
			e.bounds = append(e.bounds, b.GetUpperBound())
			e.counts = append(e.counts, b.GetCumulativeCount())
		}
		e.counts = append(e.counts, h.GetSampleCount())
		e.sum = h.GetSampleSum()
		return e
	}
	t.Fatal("no raftmq_produce_entry_messages histogram")
	return entryHist{}
}

// since is the histogram of the entries observed after before.
func (e entryHist) since(before entryHist) entryHist {
	d := entryHist{bounds: e.bounds, counts: make([]uint64, len(e.counts)), sum: e.sum - before.sum}
	for i := range e.counts {
		d.counts[i] = e.counts[i] - before.counts[i]
	}
	return d
}

func (e entryHist) total() uint64 { return e.counts[len(e.counts)-1] }

// messagesAtMost bounds from above the messages carried by entries of at
// most le messages: each such entry counted at its bucket's bound.
func (e entryHist) messagesAtMost(le float64) float64 {
	var n float64
	prev := uint64(0)
	for i, b := range e.bounds {
		if b > le {
			break
		}
		n += float64(e.counts[i]-prev) * b
		prev = e.counts[i]
	}
	return n
}

func (e entryHist) String() string {
	var b strings.Builder
	prev := uint64(0)
	for i, le := range e.bounds {
		if c := e.counts[i] - prev; c > 0 {
			fmt.Fprintf(&b, "≤%g:%d ", le, c)
		}
		prev = e.counts[i]
	}
	fmt.Fprintf(&b, "total %d entries, %.0f messages", e.total(), e.sum)
	return b.String()
}

// defaultRaftTiming gives cfg the default Raft timeouts: a flood on a
// loaded test machine should not cost the leader its lease (the tests
// still tolerate it).
func defaultRaftTiming(cfg *Config) {
	d := DefaultConfig().Raft
	cfg.Raft.HeartbeatTimeout, cfg.Raft.ElectionTimeout, cfg.Raft.LeaderLeaseTimeout = d.HeartbeatTimeout, d.ElectionTimeout, d.LeaderLeaseTimeout
}

// TestGroupCommitFillsEntriesUnderLoad keeps many single-message sends
// outstanding against the leader of a real cluster through its gRPC API
// (the shape of `raftmq bench produce --inflight 500`): group commit must
// pack what waits into large entries. Asserted on the entry-size histogram
// over the steady part of the flood (after every sender's first send
// returned, before any stops), not on timing.
func TestGroupCommitFillsEntriesUnderLoad(t *testing.T) {
	rng := rand.New(rand.NewPCG(uint64(testseed.Seed(t)), 11))
	c := startClusterWith(t, 3, defaultRaftTiming)
	body := make([]byte, 256+rng.IntN(512))
	const outstanding = 1024
	for attempt := 1; ; attempt++ {
		l := c.leader()
		h, err := flood(t, l, outstanding, body)
		if err != nil && l.raft.State() != raft.Leader && attempt < 3 {
			t.Logf("attempt %d: leadership moved during the flood (%v); again on the new leader", attempt, err)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("entries of the steady flood (messages per entry): %v", h)
		// With every sender waiting on one send, entries carry about
		// outstanding / max_in_flight messages. A starved machine lets
		// small entries go while the senders of the last big one are not
		// yet back (CI: 11 of 19 entries ≤ 64 messages, carrying ≤ 225 of
		// 4,096), so the check weighs by messages: most messages must
		// travel in entries of more than 64 (an unbatched leader sends
		// them all one per entry).
		if small := h.messagesAtMost(64); h.total() == 0 || small*2 >= h.sum {
			t.Fatalf("entries of ≤ 64 messages carried up to %.0f of %.0f messages with %d sends outstanding: group commit did not fill entries (%v)",
				small, h.sum, outstanding, h)
		}
		break
	}
	c.assertIdentical()
}

// flood keeps outstanding single-message sends in flight against l's gRPC
// API and returns l's entry-size histogram over the steady part: from when
// outstanding sends were acknowledged (every sender is past its first) to
// when 4*outstanding more were; then the senders stop.
func flood(t *testing.T, l *Node, outstanding int, body []byte) (entryHist, error) {
	t.Helper()
	cl, err := client.New(context.Background(), []string{l.APIAddr()}, client.Options{})
	if err != nil {
		return entryHist{}, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := cl.Send(ctx, client.NewMessage("T", []byte("warm-up"))); err != nil {
		return entryHist{}, err
	}
	var (
		mu            sync.Mutex
		acked         int
		before, after entryHist
		steady        = make(chan struct{}) // closed when after is taken
		firstErr      error
		wg            sync.WaitGroup
	)
	// Snapshots are taken by the sender whose acknowledgement crosses the
	// mark, under mu, so the window is exact in acknowledgements.
	ack := func() {
		mu.Lock()
		defer mu.Unlock()
		acked++
		switch acked {
		case outstanding:
			before = entryMessages(t, l)
		case 5 * outstanding:
			after = entryMessages(t, l)
			close(steady)
		}
	}
	for g := range outstanding {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-steady:
					return
				default:
				}
				if _, err := cl.Send(ctx, client.NewMessage("T", body)); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("sender %d send %d: %w", g, i, err)
						cancel()
					}
					mu.Unlock()
					return
				}
				ack()
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return entryHist{}, firstErr
	}
	return after.since(before), nil
}

// TestBackpressureRejectsBeyondQueueBound floods a leader whose group-commit
// queue is small: sends beyond the bound get RESOURCE_EXHAUSTED (reason
// OVERLOADED) with nothing stored, every other send is acknowledged, and
// exactly the acknowledged messages are stored on every replica.
func TestBackpressureRejectsBeyondQueueBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(uint64(testseed.Seed(t)), 12))
	c := startClusterWith(t, 3, func(cfg *Config) {
		defaultRaftTiming(cfg)
		cfg.GroupCommit.MaxMessages, cfg.GroupCommit.MaxInFlight = 8, 1
		cfg.GroupCommit.MaxQueueMessages, cfg.GroupCommit.QueueWait = 16, 0
	})
	l := c.leader()
	cc, err := grpc.NewClient(l.APIAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	api := pb.NewRaftMQClient(cc)

	var (
		mu       sync.Mutex
		acked    = map[string]bool{}
		unknown  = map[string]bool{} // leadership moved while it was in Raft
		where    = map[string]string{}
		rejected int
		sample   error
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Rounds of concurrent sends until the bound has been hit: one round
	// almost always does it (256 sends against a queue of 16 behind one
	// entry in Raft), but nothing here depends on how fast the disk is.
	for round := 0; round < 20 && rejected == 0; round++ {
		var wg sync.WaitGroup
		for g := range 256 {
			wg.Add(1)
			key := fmt.Sprintf("r%d-s%d-%d", round, g, rng.Uint32())
			go func() {
				defer wg.Done()
				resp, err := api.Send(ctx, &pb.SendRequest{Messages: []*pb.Message{{Topic: "T", QueueId: -1, Body: []byte(key)}}})
				mu.Lock()
				defer mu.Unlock()
				switch status.Code(err) {
				case codes.OK:
					r := resp.GetResults()
					if len(r) != 1 || r[0].GetErrorCode() != 0 {
						t.Errorf("send %s: results %v", key, r)
						return
					}
					acked[key] = true
					where[key] = fmt.Sprintf("queue %d offset %d phys %d", r[0].GetQueueId(), r[0].GetQueueOffset(), r[0].GetPhysicalOffset())
				case codes.ResourceExhausted:
					rejected++
					sample = err
				case codes.Unavailable: // not (or no longer) the leader: refused, retry-safe
					if r, _ := wire.RetryReason(err); r == "" {
						t.Errorf("send %s: %v without a retry reason", key, err)
					}
				case codes.Unknown: // leadership lost while committing
					unknown[key] = true
				default:
					t.Errorf("send %s: %v (want OK or RESOURCE_EXHAUSTED)", key, err)
				}
			}()
		}
		wg.Wait()
		if t.Failed() {
			return
		}
	}
	if rejected == 0 {
		t.Fatal("20 rounds of 256 concurrent sends against a queue bound of 16 were never refused")
	}
	if r, _ := wire.RetryReason(sample); r != wire.ReasonOverloaded || !strings.Contains(status.Convert(sample).Message(), "max_queue_messages") {
		t.Fatalf("refusal %v: want reason %s and a message naming the bound", sample, wire.ReasonOverloaded)
	}
	t.Logf("acked %d, refused %d, outcome unknown %d; a refusal: %v", len(acked), rejected, len(unknown), sample)
	// Raft's applied index moves before the FSM has applied an entry, so
	// wait for the replicas' stores themselves: each must come to hold
	// exactly the acknowledged messages, once each.
	for _, n := range c.nodes {
		var stored map[string]int
		exact := func() bool {
			stored = storedBodies(t, n)
			for key := range acked {
				if stored[key] != 1 {
					return false
				}
			}
			for key, k := range stored {
				if k != 1 || !acked[key] && !unknown[key] {
					return false
				}
			}
			return true
		}
		deadline := time.Now().Add(20 * time.Second)
		for !exact() {
			if time.Now().After(deadline) {
				for key := range acked {
					if stored[key] != 1 {
						t.Errorf("%s: acknowledged %s (%s) stored %d times", n.cfg.ID, key, where[key], stored[key])
					}
				}
				for key, k := range stored {
					if k != 1 || !acked[key] && !unknown[key] {
						t.Errorf("%s: %s stored %d times (acknowledged %v, outcome unknown %v)", n.cfg.ID, key, k, acked[key], unknown[key])
					}
				}
				t.Fatalf("%s (leader %v) stores %d messages, %d were acknowledged", n.cfg.ID, n == l, len(stored), len(acked))
			}
			time.Sleep(10 * time.Millisecond) // polling the stores: the condition is exact()
		}
	}
}

// storedBodies counts the bodies of topic T on n.
func storedBodies(t *testing.T, n *Node) map[string]int {
	t.Helper()
	seen := map[string]int{}
	st := n.Store()
	queues := st.Stats().Queues
	for q := int32(0); q < int32(max(queues, 16)); q++ {
		for off := int64(0); ; {
			res, err := st.GetMessages("T", q, off, 256, 1<<20, "")
			if err != nil || len(res.Messages) == 0 {
				break
			}
			for _, m := range res.Messages {
				seen[string(m.Body)]++
			}
			off = res.NextOffset
		}
	}
	return seen
}

// TestEnqueueWaitsWithinDeadline: a send that finds the queue full waits
// for room at most until (nine tenths of) its deadline, then fails with
// ErrOverloaded, never proposed; room freed meanwhile lets it in.
func TestEnqueueWaitsWithinDeadline(t *testing.T) {
	cfg := DefaultConfig()
	cfg.GroupCommit.MaxMessages, cfg.GroupCommit.MaxQueueMessages, cfg.GroupCommit.QueueWait = 2, 2, time.Hour
	n := &Node{cfg: cfg, stop: make(chan struct{})}
	b := newBatcher(n)
	b.inFlight = b.g.MaxInFlight // nothing may be proposed: the queue stays full
	one := []message.Message{{Topic: "T", Body: []byte("x")}}
	reqs := make([]*sendReq, 2)
	for i := range reqs {
		reqs[i] = &sendReq{msgs: one, bytes: msgBytes(&one[0]), done: make(chan sendResult, 1)}
		if err := b.enqueue(context.Background(), reqs[i:i+1]); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	extra := &sendReq{msgs: one, bytes: msgBytes(&one[0]), done: make(chan sendResult, 1)}
	err := b.enqueue(ctx, []*sendReq{extra})
	if !errors.Is(err, transport.ErrOverloaded) {
		t.Fatalf("enqueue into a full queue: %v, want ErrOverloaded", err)
	}
	if extra.state.Load() != reqPending || b.qMsgs != 2 {
		t.Fatalf("refused request state %d, queue %d messages", extra.state.Load(), b.qMsgs)
	}
	// A waiter is let in once a queued request is withdrawn.
	entered := make(chan error, 1)
	go func() { entered <- b.enqueue(context.Background(), []*sendReq{extra}) }()
	waitFor(t, "the send to wait for room", 10*time.Second, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.room != nil
	})
	if !b.abandon(reqs[0]) {
		t.Fatal("abandon of a queued request failed")
	}
	if err := <-entered; err != nil {
		t.Fatalf("enqueue after room freed: %v", err)
	}
	batch, count, _ := b.take()
	if len(batch) != 2 || batch[0] != reqs[1] || batch[1] != extra || count != 2 {
		t.Fatalf("take: %d requests, %d messages; want the two pending in order", len(batch), count)
	}
}

// The [group_commit] backpressure settings load from TOML and are checked.
func TestGroupCommitQueueSettings(t *testing.T) {
	file := filepath.Join(t.TempDir(), "raftmq.toml")
	if err := os.WriteFile(file, []byte("[group_commit]\nmax_queue_messages = 2048\nmax_queue_bytes = 4194304\nqueue_wait = \"250ms\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load([]string{"--config", file}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if g := cfg.GroupCommit; g.MaxQueueMessages != 2048 || g.MaxQueueBytes != 4<<20 || g.QueueWait != 250*time.Millisecond || g.MaxInFlight != 2 {
		t.Fatalf("loaded %+v", g)
	}
	for name, mut := range map[string]func(*GroupCommit){
		"queue messages below one entry": func(g *GroupCommit) { g.MaxQueueMessages = g.MaxMessages - 1 },
		"queue bytes below one entry":    func(g *GroupCommit) { g.MaxQueueBytes = g.MaxBytes - 1 },
		"negative queue wait":            func(g *GroupCommit) { g.QueueWait = -time.Millisecond },
	} {
		c := DefaultConfig()
		mut(&c.GroupCommit)
		if err := c.Validate(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "group_commit") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
