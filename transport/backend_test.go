package transport

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/raftmq/raftmq/message"
	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/wire"
)

// recBackend records every call; writes answer with err (or fake results).
// Store returns nil, so a read that gets past validation panics the test.
type recBackend struct {
	mu     sync.Mutex
	calls  []string
	sent   [][]message.Message
	status wire.ClusterStatus
	err    error
}

func (b *recBackend) record(name string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, name)
	return b.err
}

func (b *recBackend) Calls() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.calls...)
}

func (b *recBackend) Send(ctx context.Context, msgs []message.Message) ([]store.PutResult, error) {
	if err := b.record("Send"); err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.sent = append(b.sent, msgs)
	b.mu.Unlock()
	out := make([]store.PutResult, len(msgs))
	for i, m := range msgs {
		out[i] = store.PutResult{Topic: m.Topic, QueueID: m.QueueID, QueueOffset: int64(i), PhysicalOffset: int64(100 * i), MsgID: "id"}
	}
	return out, nil
}
func (b *recBackend) CommitOffsets(ctx context.Context, c []store.OffsetCommit) error {
	return b.record("CommitOffsets")
}
func (b *recBackend) CreateTopic(ctx context.Context, t store.TopicConfig) error {
	return b.record("CreateTopic")
}
func (b *recBackend) DeleteTopic(ctx context.Context, name string) error {
	return b.record("DeleteTopic")
}
func (b *recBackend) Join(ctx context.Context, id, raftAddr, apiAddr string) error {
	return b.record("Join")
}
func (b *recBackend) Remove(ctx context.Context, id string) error   { return b.record("Remove") }
func (b *recBackend) Transfer(ctx context.Context, id string) error { return b.record("Transfer") }
func (b *recBackend) Reader() store.Reader {
	_ = b.record("Reader")
	return nil
}

// SetStatus replaces the status under the lock: the server's health loop
// reads it concurrently.
func (b *recBackend) SetStatus(s wire.ClusterStatus) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.status = s
}

func (b *recBackend) Status() wire.ClusterStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.status
}

// startServer serves b on a loopback port and returns its address and a
// client; both are closed when the test ends.
func startServer(t *testing.T, b Backend) (string, pb.RaftMQClient, *Server) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(b, ServerOptions{HealthInterval: 10 * time.Millisecond})
	done := make(chan error, 1)
	go func() { done <- s.Serve(lis) }()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Stop(ctx)
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return lis.Addr().String(), pb.NewRaftMQClient(cc), s
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func healthClient(t *testing.T, addr string) healthpb.HealthClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return healthpb.NewHealthClient(cc)
}
