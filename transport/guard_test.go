package transport_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/auth"
	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
	"github.com/raftmq/raftmq/quota"
	"github.com/raftmq/raftmq/transport"
	"github.com/raftmq/raftmq/transport/transporttest"
)

const guardNodeToken = "node-token-for-the-guard-test"

func openAuth(t *testing.T) *auth.Authenticator {
	t.Helper()
	body := `node_token = "` + guardNodeToken + `"
[[users]]
name = "ops"
token_sha256 = "` + auth.HashToken("admin") + `"
admin = true
[[users]]
name = "producer"
token_sha256 = "` + auth.HashToken("producer") + `"
produce = ["orders"]
[[users]]
name = "consumer"
token_sha256 = "` + auth.HashToken("consumer") + `"
consume = ["orders"]
groups = ["billing"]
`
	p := filepath.Join(t.TempDir(), "auth.toml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := auth.Open(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func dialConn(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

func as(ctx context.Context, token string) context.Context {
	if token == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, transport.MetadataAuthorization, "Bearer "+token)
}

func TestGuardRolesPerRPC(t *testing.T) {
	s := transporttest.StartTWith(t, transport.ServerOptions{Auth: openAuth(t)})
	cc := dialConn(t, s.Addr)
	c := pb.NewRaftMQClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.CreateTopic(as(ctx, "admin"), &pb.CreateTopicRequest{Name: "orders", Queues: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(as(ctx, "admin"), &pb.CreateTopicRequest{Name: "secret", Queues: 1}); err != nil {
		t.Fatal(err)
	}
	send := func(token, topic string) error {
		_, err := c.Send(as(ctx, token), &pb.SendRequest{Messages: []*pb.Message{{Topic: topic, QueueId: 0, Body: []byte("x")}}})
		return err
	}
	r, err := c.Send(as(ctx, "admin"), &pb.SendRequest{Messages: []*pb.Message{{Topic: "secret", QueueId: 0, Body: []byte("x")}}})
	if err != nil {
		t.Fatal(err)
	}
	secretAt := r.GetResults()[0].GetPhysicalOffset()
	calls := map[string]func(token string) error{
		"send orders": func(tok string) error { return send(tok, "orders") },
		"send secret": func(tok string) error { return send(tok, "secret") },
		"pull": func(tok string) error {
			_, err := c.Pull(as(ctx, tok), &pb.PullRequest{Topic: "orders"})
			return err
		},
		"commit": func(tok string) error {
			_, err := c.CommitOffset(as(ctx, tok), &pb.CommitOffsetRequest{Commits: []*pb.OffsetCommit{{Group: "billing", Topic: "orders", Offset: 1}}})
			return err
		},
		"commit other group": func(tok string) error {
			_, err := c.CommitOffset(as(ctx, tok), &pb.CommitOffsetRequest{Commits: []*pb.OffsetCommit{{Group: "audit", Topic: "orders", Offset: 1}}})
			return err
		},
		"delete topic": func(tok string) error {
			_, err := c.DeleteTopic(as(ctx, tok), &pb.DeleteTopicRequest{Name: "nothing-here"})
			return err
		},
		"join": func(tok string) error {
			_, err := c.Join(as(ctx, tok), &pb.JoinRequest{Id: "n9", RaftAddr: "127.0.0.1:1", ApiAddr: "127.0.0.1:2"})
			return err
		},
		"remove": func(tok string) error {
			_, err := c.Remove(as(ctx, tok), &pb.RemoveRequest{Id: "n9"})
			return err
		},
		"transfer": func(tok string) error {
			_, err := c.Transfer(as(ctx, tok), &pb.TransferRequest{})
			return err
		},
		"status": func(tok string) error {
			_, err := c.Status(as(ctx, tok), &pb.StatusRequest{})
			return err
		},
	}
	// What each principal gets: OK, or the code of the refusal (admin
	// gets the backend's own answer for what the test backend lacks).
	want := map[string]map[string]codes.Code{
		"producer": {"send orders": codes.OK, "send secret": codes.PermissionDenied, "pull": codes.PermissionDenied,
			"commit": codes.PermissionDenied, "commit other group": codes.PermissionDenied, "delete topic": codes.PermissionDenied,
			"join": codes.PermissionDenied, "remove": codes.PermissionDenied, "transfer": codes.PermissionDenied, "status": codes.OK},
		"consumer": {"send orders": codes.PermissionDenied, "send secret": codes.PermissionDenied, "pull": codes.OK,
			"commit": codes.OK, "commit other group": codes.PermissionDenied, "delete topic": codes.PermissionDenied,
			"join": codes.PermissionDenied, "remove": codes.PermissionDenied, "transfer": codes.PermissionDenied, "status": codes.OK},
		"":             {"send orders": codes.Unauthenticated, "pull": codes.Unauthenticated, "delete topic": codes.Unauthenticated, "status": codes.Unauthenticated},
		"forged":       {"send orders": codes.Unauthenticated, "pull": codes.Unauthenticated, "join": codes.Unauthenticated, "status": codes.Unauthenticated},
		"admin":        {"send orders": codes.OK, "pull": codes.OK, "commit other group": codes.OK, "delete topic": codes.NotFound, "status": codes.OK},
		guardNodeToken: {"send secret": codes.OK, "delete topic": codes.NotFound},
	}
	before := s.GuardStats().Denied
	refusals := uint64(0)
	for tok, calls2 := range want {
		for name, code := range calls2 {
			err := calls[name](tok)
			if got := status.Code(err); got != code {
				t.Errorf("token %q, %s: %v (%v), want %v", tok, name, got, err, code)
			}
			if code == codes.PermissionDenied || code == codes.Unauthenticated {
				refusals++
			}
		}
	}
	if got := s.GuardStats().Denied - before; got != refusals {
		t.Errorf("guard counted %d refusals, want %d", got, refusals)
	}

	// The health service stays open; reflection needs a principal.
	if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("health without a token: %v", err)
	}
	stream, err := reflectionpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	if err == nil {
		_ = stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("reflection without a token: %v", err)
	}

	// A query that names no topic answers only what the caller may read.
	for tok, want := range map[string]int{"admin": 1, "consumer": 0} {
		r, err := c.QueryByOffset(as(ctx, tok), &pb.QueryByOffsetRequest{PhysicalOffset: secretAt})
		if err != nil {
			t.Fatalf("%s query: %v", tok, err)
		}
		if got := len(r.GetMessages()); got != want {
			t.Errorf("%s: query by offset answered %d messages of topic secret, want %d", tok, got, want)
		}
	}
}

// fakeClock is a settable clock for the quotas' buckets.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestQuotasCutOneClientNotAnother(t *testing.T) {
	clk := &fakeClock{now: time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)}
	lim := quota.New(quota.Config{MessagesPerSecond: 100, BytesPerSecond: 1 << 20}, clk.Now)
	s := transporttest.StartTWith(t, transport.ServerOptions{Auth: openAuth(t),
		Quotas: transport.Quotas{Produce: lim, MaxTopics: 2}})
	c := pb.NewRaftMQClient(dialConn(t, s.Addr))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.CreateTopic(as(ctx, "admin"), &pb.CreateTopicRequest{Name: "orders", Queues: 1}); err != nil {
		t.Fatal(err)
	}
	batch := func(n, size int) *pb.SendRequest {
		r := &pb.SendRequest{}
		for range n {
			r.Messages = append(r.Messages, &pb.Message{Topic: "orders", QueueId: 0, Body: make([]byte, size)})
		}
		return r
	}
	// The producer spends its second's worth (100 messages); one more is
	// held 10 ms until its token comes, 150 more (1.5 s) are refused.
	if _, err := c.Send(as(ctx, "producer"), batch(100, 10)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(as(ctx, "producer"), batch(1, 10)); err != nil {
		t.Fatalf("one message over the rate: %v", err)
	}
	if got := s.GuardStats().Throttled; got != 1 {
		t.Errorf("throttled %d, want 1", got)
	}
	_, err := c.Send(as(ctx, "producer"), batch(150, 10))
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("1.5 s worth over the rate: %v", err)
	}
	// Another principal (admin) is not cut; nor is a node forwarding.
	if _, err := c.Send(as(ctx, "admin"), batch(100, 10)); err != nil {
		t.Fatalf("another client: %v", err)
	}
	if _, err := c.Send(as(ctx, guardNodeToken), batch(500, 10)); err != nil {
		t.Fatalf("a node: %v", err)
	}
	// Two seconds later the producer may send again; bytes are bounded too.
	clk.Add(2 * time.Second)
	if _, err := c.Send(as(ctx, "producer"), batch(1, 10)); err != nil {
		t.Fatalf("after a second: %v", err)
	}
	if _, err := c.Send(as(ctx, "producer"), batch(3, 1<<20)); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("3 MiB at once under a 1 MiB/s quota: %v", err)
	}
	if got := s.GuardStats().Limited; got != 2 {
		t.Errorf("limited %d, want 2", got)
	}
	// Topics: orders plus one more, then no more.
	if _, err := c.CreateTopic(as(ctx, "admin"), &pb.CreateTopicRequest{Name: "t2", Queues: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(as(ctx, "admin"), &pb.CreateTopicRequest{Name: "t3", Queues: 1}); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("third topic: %v", err)
	}
	r := batch(1, 1)
	r.Messages[0].Topic = "t4"
	if _, err := c.Send(as(ctx, "admin"), r); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a send creating a third topic: %v", err)
	}
}

func TestLongPollsPerConnection(t *testing.T) {
	s := transporttest.StartTWith(t, transport.ServerOptions{Quotas: transport.Quotas{LongPollsPerConnection: 2}})
	first := pb.NewRaftMQClient(dialConn(t, s.Addr))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := first.CreateTopic(ctx, &pb.CreateTopicRequest{Name: "T", Queues: 1}); err != nil {
		t.Fatal(err)
	}
	// One message: polls at offset 1 wait for the next.
	if _, err := first.Send(ctx, &pb.SendRequest{Messages: []*pb.Message{{Topic: "T", Body: []byte("x")}}}); err != nil {
		t.Fatal(err)
	}
	pollCtx, stopPolls := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A probe below may hold a slot for a moment: a poll refused
			// then tries again, so that both end up held.
			for pollCtx.Err() == nil {
				_, err := first.Pull(pollCtx, &pb.PullRequest{Topic: "T", Offset: 1, MaxWaitMs: 15_000})
				if status.Code(err) != codes.ResourceExhausted {
					return
				}
			}
		}()
	}
	// Once both polls hold their slots a third on the same connection is
	// refused (tried until then, bounded by ctx).
	var err error
	for ctx.Err() == nil {
		_, err = first.Pull(ctx, &pb.PullRequest{Topic: "T", MaxWaitMs: 1})
		if status.Code(err) == codes.ResourceExhausted {
			break
		}
	}
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("third long poll: %v", err)
	}
	// Another connection polls freely.
	other := pb.NewRaftMQClient(dialConn(t, s.Addr))
	if _, err := other.Pull(ctx, &pb.PullRequest{Topic: "T", MaxWaitMs: 1}); err != nil {
		t.Fatalf("another connection: %v", err)
	}
	stopPolls()
	wg.Wait()
	// The slots are given back.
	for ctx.Err() == nil {
		if _, err = first.Pull(ctx, &pb.PullRequest{Topic: "T", MaxWaitMs: 1}); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("after the polls ended: %v", err)
	}
}
