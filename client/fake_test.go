package client

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/transport"
	"github.com/raftmq/raftmq/wire"
)

// fakeNode is a transport.Backend whose role the test sets; it counts the
// Sends it accepted.
type fakeNode struct {
	mu      sync.Mutex
	status  wire.ClusterStatus
	sendErr error
	block   bool // Send waits for ctx to end
	// gate, when set, holds every Send until it is closed (or ctx ends).
	gate chan struct{}
	// deaf, when set, holds every Send until it is closed, whatever its
	// ctx: a server that never answers.
	deaf    chan struct{}
	sends   int
	batches []int
	next    int64
}

func (f *fakeNode) set(fn func(f *fakeNode)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeNode) Send(ctx context.Context, msgs []message.Message) ([]store.PutResult, error) {
	f.mu.Lock()
	f.sends++
	err, block, gate, deaf := f.sendErr, f.block, f.gate, f.deaf
	if err == nil && !block {
		f.batches = append(f.batches, len(msgs))
	}
	f.mu.Unlock()
	if deaf != nil {
		<-deaf
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]store.PutResult, len(msgs))
	for i, m := range msgs {
		out[i] = store.PutResult{Topic: m.Topic, QueueID: m.QueueID, QueueOffset: f.next}
		f.next++
	}
	return out, nil
}

// Batches is the message count of every Send accepted so far.
func (f *fakeNode) Batches() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.batches...)
}

func (f *fakeNode) Sends() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sends
}

func (f *fakeNode) write() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sendErr
}

func (f *fakeNode) CommitOffsets(context.Context, []store.OffsetCommit) error { return f.write() }
func (f *fakeNode) CreateTopic(context.Context, store.TopicConfig) error      { return f.write() }
func (f *fakeNode) DeleteTopic(context.Context, string) error                 { return f.write() }
func (f *fakeNode) Join(context.Context, string, string, string) error        { return f.write() }
func (f *fakeNode) Remove(context.Context, string) error                      { return f.write() }
func (f *fakeNode) Transfer(context.Context, string) error                    { return f.write() }
func (f *fakeNode) Reader() store.Reader                                      { return nil }
func (f *fakeNode) Status() wire.ClusterStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.status
}

func serve(t *testing.T, b transport.Backend) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := transport.NewServer(b, transport.ServerOptions{})
	done := make(chan error, 1)
	go func() { done <- s.Serve(lis) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Stop(ctx)
		<-done
	})
	return lis.Addr().String()
}

func deadAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := lis.Addr().String()
	_ = lis.Close()
	return a
}

// cluster starts a leader and a follower (forwarding disabled by giving the
// follower no leader API address unless asked).
func cluster(t *testing.T) (leader, follower *fakeNode, lAddr, fAddr string) {
	leader, follower = &fakeNode{}, &fakeNode{sendErr: transport.ErrNotLeader}
	lAddr, fAddr = serve(t, leader), serve(t, follower)
	leader.set(func(f *fakeNode) { f.status = wire.ClusterStatus{ID: "n1", LeaderID: "n1", LeaderAPIAddr: lAddr} })
	follower.set(func(f *fakeNode) { f.status = wire.ClusterStatus{ID: "n2", LeaderID: "n1", LeaderAPIAddr: lAddr} })
	return
}

func newClient(t *testing.T, seeds ...string) *Client {
	t.Helper()
	c, err := New(testCtx(t), seeds, Options{Backoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}
