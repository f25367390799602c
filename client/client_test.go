package client

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/internal/testseed"
	"github.com/raftmq/raftmq/transport"
	"github.com/raftmq/raftmq/wire"
)

func TestLeaderDiscoveryFromFollowerSeed(t *testing.T) {
	leader, follower, lAddr, fAddr := cluster(t)
	c := newClient(t, deadAddr(t), fAddr)
	if c.leader() != lAddr {
		t.Fatalf("leader %q, want %q", c.leader(), lAddr)
	}
	res, err := c.Send(testCtx(t), NewMessage("T", []byte("x")).WithQueue(1))
	if err != nil || len(res) != 1 || res[0].QueueID != 1 || len(res[0].MsgID) != 32 {
		t.Fatalf("send: %v %+v", err, res)
	}
	if leader.Sends() != 1 || follower.Sends() != 0 {
		t.Fatalf("sends leader=%d follower=%d", leader.Sends(), follower.Sends())
	}
}

func TestNewFailsWithNoServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := New(ctx, []string{deadAddr(t)}, Options{}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err %v, want ErrUnavailable", err)
	}
	if _, err := New(ctx, nil, Options{}); !errors.Is(err, ErrNoSeeds) {
		t.Fatalf("err %v", err)
	}
}

// The leader steps down (no leader for a while, then the other node leads):
// the not-sent error is retried on the new leader, exactly once.
func TestFollowsLeaderChange(t *testing.T) {
	a, b, aAddr, bAddr := cluster(t)
	c := newClient(t, aAddr)
	a.set(func(f *fakeNode) {
		f.sendErr = transport.ErrNoLeader
		f.status = wire.ClusterStatus{ID: "n1", LeaderID: "n2", LeaderAPIAddr: bAddr}
	})
	b.set(func(f *fakeNode) {
		f.sendErr = nil
		f.status = wire.ClusterStatus{ID: "n2", LeaderID: "n2", LeaderAPIAddr: bAddr}
	})
	if _, err := c.Send(testCtx(t), NewMessage("T", []byte("x"))); err != nil {
		t.Fatalf("send: %v", err)
	}
	if a.Sends() != 1 || b.Sends() != 1 || c.leader() != bAddr {
		t.Fatalf("sends a=%d b=%d leader=%s", a.Sends(), b.Sends(), c.leader())
	}
}

func TestRetriesRefusedConnection(t *testing.T) {
	leader, _, lAddr, _ := cluster(t)
	c := newClient(t, lAddr)
	c.setLeader(deadAddr(t)) // stale: that node is gone
	if _, err := c.Send(testCtx(t), NewMessage("T", []byte("x"))); err != nil {
		t.Fatalf("send: %v", err)
	}
	if leader.Sends() != 1 || c.leader() != lAddr {
		t.Fatalf("sends %d leader %s", leader.Sends(), c.leader())
	}
}

func TestOutcomeUnknownIsNotRetried(t *testing.T) {
	leader, _, lAddr, _ := cluster(t)
	c, err := New(testCtx(t), []string{lAddr}, Options{Backoff: time.Millisecond, DisableIdempotence: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	leader.set(func(f *fakeNode) { f.sendErr = fmt.Errorf("raft: %w", transport.ErrOutcomeUnknown) })
	_, err = c.Send(testCtx(t), NewMessage("T", []byte("x")))
	if !IsOutcomeUnknown(err) || status.Code(err) != codes.Unknown {
		t.Fatalf("err %v", err)
	}
	if leader.Sends() != 1 {
		t.Fatalf("sent %d times", leader.Sends())
	}

	// A deadline after the request reached the leader: unknown too.
	leader.set(func(f *fakeNode) { f.sendErr, f.block = nil, true })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = c.Send(ctx, NewMessage("T", []byte("x")))
	if !IsOutcomeUnknown(err) || leader.Sends() != 2 {
		t.Fatalf("deadline: err %v sends %d", err, leader.Sends())
	}
}

// An idempotent Send (the default) is sent again after an unknown outcome;
// when its context ends first, the outcome is still unknown, never
// "nothing applied".
func TestIdempotentOutcomeUnknownIsRetried(t *testing.T) {
	leader, _, lAddr, _ := cluster(t)
	c := newClient(t, lAddr)
	leader.set(func(f *fakeNode) { f.sendErr = fmt.Errorf("raft: %w", transport.ErrOutcomeUnknown) })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := c.Send(ctx, NewMessage("T", []byte("x")))
	if !IsOutcomeUnknown(err) {
		t.Fatalf("err %v", err)
	}
	if leader.Sends() < 2 {
		t.Fatalf("sent %d times: an idempotent Send is retried", leader.Sends())
	}
}

func TestNoLeaderGivesUp(t *testing.T) {
	leader, follower, lAddr, _ := cluster(t)
	c := newClient(t, lAddr)
	for _, f := range []*fakeNode{leader, follower} {
		f.set(func(f *fakeNode) { f.sendErr, f.status = transport.ErrNoLeader, wire.ClusterStatus{ID: "x"} })
	}
	// The budget is time: the call keeps trying for RetryTimeout, then
	// gives up with ErrUnavailable (nothing was proposed).
	c.opts.RetryTimeout = 400 * time.Millisecond
	start := time.Now()
	err := c.CreateTopic(testCtx(t), "T", 8)
	took := time.Since(start)
	if !errors.Is(err, ErrUnavailable) || IsOutcomeUnknown(err) {
		t.Fatalf("err %v", err)
	}
	if took < c.opts.RetryTimeout || took > c.opts.RetryTimeout+5*time.Second {
		t.Fatalf("gave up after %v, want just after RetryTimeout %v", took, c.opts.RetryTimeout)
	}
	// A context shorter than the budget ends the call with its own error.
	c.opts.RetryTimeout = time.Hour
	ctx, cancel := context.WithTimeout(testCtx(t), 200*time.Millisecond)
	defer cancel()
	if err := c.CreateTopic(ctx, "T", 8); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("short context: err %v", err)
	}
}

// Pauses grow to maxPause and are jittered within [d/2, d): not all equal.
func TestRetryJitter(t *testing.T) {
	seen := map[time.Duration]bool{}
	for i := 0; i < 200; i++ {
		for attempt := 1; attempt <= 20; attempt++ {
			d := min(50*time.Millisecond<<min(attempt-1, 16), maxPause)
			p := jittered(50*time.Millisecond, attempt)
			if p < d/2 || p >= d {
				t.Fatalf("attempt %d: pause %v outside [%v, %v)", attempt, p, d/2, d)
			}
			if attempt == 20 {
				seen[p] = true
			}
		}
	}
	if len(seen) < 10 {
		t.Fatalf("only %d distinct pauses at the cap: no jitter", len(seen))
	}
}

// A leader whose group-commit queue is full refuses with RESOURCE_EXHAUSTED
// (reason OVERLOADED): nothing was proposed, so the client retries on the
// same leader after its backoff, without re-resolving, and reports
// ErrOverloaded when every attempt was refused.
func TestOverloadedIsRetriedOnSameLeader(t *testing.T) {
	leader, follower, lAddr, _ := cluster(t)
	c := newClient(t, lAddr)
	leader.set(func(f *fakeNode) { f.sendErr = fmt.Errorf("node: queue full: %w", transport.ErrOverloaded) })
	c.opts.RetryTimeout = 400 * time.Millisecond
	_, err := c.Send(testCtx(t), NewMessage("T", []byte("x")))
	if !errors.Is(err, ErrOverloaded) || IsOutcomeUnknown(err) || status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("err %v (code %v), want ErrOverloaded with RESOURCE_EXHAUSTED", err, status.Code(err))
	}
	if leader.Sends() < 2 || follower.Sends() != 0 || c.leader() != lAddr {
		t.Fatalf("sends leader=%d follower=%d, leader %q: want every try on %s", leader.Sends(), follower.Sends(), c.leader(), lAddr)
	}
	leader.set(func(f *fakeNode) { f.sendErr = nil })
	if _, err := c.Send(testCtx(t), NewMessage("T", []byte("x"))); err != nil {
		t.Fatalf("send once the queue has room: %v", err)
	}
}

// A leader whose disk is full refuses with RESOURCE_EXHAUSTED and no retry
// reason: the send failed for sure (not unknown), and the client does not
// retry it (space comes back only when retention or a delete frees it).
func TestDiskFullFailsAtOnce(t *testing.T) {
	leader, follower, lAddr, _ := cluster(t)
	c := newClient(t, lAddr)
	leader.set(func(f *fakeNode) { f.sendErr = fmt.Errorf("node: disk 95%% used: %w", transport.ErrDiskFull) })
	_, err := c.Send(testCtx(t), NewMessage("T", []byte("x")))
	if err == nil || IsOutcomeUnknown(err) || status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "disk 95% used") {
		t.Fatalf("err %v (code %v), want a definite RESOURCE_EXHAUSTED naming the disk", err, status.Code(err))
	}
	if leader.Sends() != 1 || follower.Sends() != 0 {
		t.Fatalf("sends leader=%d follower=%d: want exactly one try", leader.Sends(), follower.Sends())
	}
}

func TestClassify(t *testing.T) {
	cases := []struct {
		err   error
		write bool
		want  error
	}{
		{status.Error(codes.InvalidArgument, "x"), true, ErrInvalid},
		{status.Error(codes.NotFound, "x"), false, ErrNotFound},
		{status.Error(codes.AlreadyExists, "x"), true, ErrAlreadyExists},
		{status.Error(codes.Unknown, "outcome unknown"), true, ErrOutcomeUnknown},
		{status.Error(codes.DeadlineExceeded, "x"), true, ErrOutcomeUnknown},
		{status.Error(codes.Unavailable, "transport is closing"), true, ErrOutcomeUnknown},
		{status.Error(codes.Unavailable, "x"), false, ErrUnavailable},
	}
	for _, tc := range cases {
		if got := classify(tc.err, tc.write); !errors.Is(got, tc.want) || status.Code(got) != status.Code(tc.err) {
			t.Errorf("classify(%v, %v) = %v, want %v", tc.err, tc.write, got, tc.want)
		}
	}
	refused := status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused"`)
	if !retrySafe(refused) || retrySafe(status.Error(codes.Unavailable, "error reading from server: EOF")) {
		t.Fatal("retrySafe misclassifies")
	}
}

func TestIDGeneratorUnique(t *testing.T) {
	g1, g2 := NewIDGenerator(), NewIDGenerator()
	seen := map[string]bool{}
	for i := 0; i < 10000; i++ {
		for _, id := range []string{g1.Next(), g2.Next()} {
			if len(id) != 32 || strings.ToUpper(id) != id || seen[id] {
				t.Fatalf("bad or repeated id %q", id)
			}
			seen[id] = true
		}
	}
}

func TestUpperHexMatchesEncodeToString(t *testing.T) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	for i := 0; i < 1000; i++ {
		var b [16]byte
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		if got, want := upperHex(b), strings.ToUpper(hex.EncodeToString(b[:])); got != want {
			t.Fatalf("upperHex(%x) = %q, want %q", b, got, want)
		}
	}
}

func TestMessageProperties(t *testing.T) {
	m := NewMessage("T", nil).WithID("ID1").WithKeys("a", "b").WithTag("tg").WithProperty("z", "1").WithProperty("y", "2")
	var got []string
	for _, p := range m.toProto().GetProperties() {
		got = append(got, p.GetKey()+"="+p.GetValue())
	}
	if want := "UNIQ_KEY=ID1 KEYS=a b TAGS=tg y=2 z=1"; strings.Join(got, " ") != want {
		t.Fatalf("properties %q, want %q", strings.Join(got, " "), want)
	}
}

func TestProducerBatchesAndCallsBackOnce(t *testing.T) {
	leader, _, lAddr, _ := cluster(t)
	c := newClient(t, lAddr)
	p := NewProducer(c, ProducerOptions{MaxBatch: 16, Linger: time.Millisecond, MaxInFlight: 3})
	const n = 1000
	var mu sync.Mutex
	got := map[string]int{}
	for i := 0; i < n; i++ {
		p.SendAsync(NewMessage("T", []byte("x")).WithQueue(0), func(r SendResult, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("send: %v", err)
			}
			got[r.MsgID]++
		})
	}
	if err := p.Flush(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(got) != n {
		t.Fatalf("%d distinct callbacks, want %d", len(got), n)
	}
	for id, k := range got {
		if k != 1 {
			t.Fatalf("%s called back %d times", id, k)
		}
	}
	mu.Unlock()
	leader.mu.Lock()
	for _, b := range leader.batches {
		if b > 16 {
			t.Errorf("batch of %d > MaxBatch", b)
		}
	}
	if len(leader.batches) >= n {
		t.Errorf("%d batches for %d messages: no batching", len(leader.batches), n)
	}
	leader.mu.Unlock()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	var closedErr error
	p.SendAsync(NewMessage("T", nil), func(_ SendResult, err error) { closedErr = err })
	if !errors.Is(closedErr, ErrClosed) {
		t.Fatalf("after close: %v", closedErr)
	}
}

func TestProducerCloseDeliversQueued(t *testing.T) {
	_, _, lAddr, _ := cluster(t)
	c := newClient(t, lAddr)
	p := NewProducer(c, ProducerOptions{MaxBatch: 1000, Linger: time.Hour})
	var mu sync.Mutex
	calls := 0
	for i := 0; i < 10; i++ {
		p.SendAsync(NewMessage("T", nil).WithQueue(0), func(SendResult, error) { mu.Lock(); calls++; mu.Unlock() })
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if calls != 10 {
		t.Fatalf("%d callbacks after Close, want 10", calls)
	}
}

// TestSendWithoutDeadlineEnds: a Send whose caller set no deadline, to a
// leader that never answers, ends after Options.RetryTimeout with an
// unknown outcome instead of waiting forever.
func TestSendWithoutDeadlineEnds(t *testing.T) {
	leader, _, lAddr, _ := cluster(t)
	deaf := make(chan struct{})
	t.Cleanup(func() { close(deaf) })
	c, err := New(testCtx(t), []string{lAddr}, Options{Backoff: time.Millisecond, RetryTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	leader.set(func(f *fakeNode) { f.deaf = deaf })
	done := make(chan error, 1)
	go func() {
		_, err := c.Send(context.Background(), NewMessage("T", []byte("x")))
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrOutcomeUnknown) || !strings.Contains(err.Error(), "no answer within") {
			t.Fatalf("send to a deaf leader: %v, want an unknown outcome after RetryTimeout", err)
		}
		if leader.Sends() != 1 {
			t.Fatalf("the deaf leader got %d sends, want 1 (a write with an unknown outcome is not sent again)", leader.Sends())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a Send without a deadline to a leader that never answers was still waiting after 5 s (RetryTimeout 300 ms)")
	}
}
