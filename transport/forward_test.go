package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/wire"
)

func sendOne(ctx context.Context, c pb.RaftMQClient) (*pb.SendResponse, error) {
	return c.Send(ctx, &pb.SendRequest{Messages: []*pb.Message{msg("T", 3, "hello")}})
}

func TestForwardToLeader(t *testing.T) {
	leader := &recBackend{status: wire.ClusterStatus{ID: "n1", LeaderID: "n1"}}
	leaderAddr, _, _ := startServer(t, leader)
	follower := &recBackend{err: fmt.Errorf("node: %w", ErrNotLeader),
		status: wire.ClusterStatus{ID: "n2", LeaderID: "n1", LeaderAPIAddr: leaderAddr}}
	_, fc, _ := startServer(t, follower)
	ctx := testCtx(t)

	resp, err := sendOne(ctx, fc)
	if err != nil {
		t.Fatalf("send via follower: %v", err)
	}
	if len(resp.GetResults()) != 1 || resp.GetResults()[0].GetQueueId() != 3 {
		t.Fatalf("results %v", resp.GetResults())
	}
	if got := leader.Calls(); len(got) != 1 || got[0] != "Send" {
		t.Fatalf("leader calls %v", got)
	}
	// The follower filled born timestamp and host before forwarding.
	m := leader.sent[0][0]
	if m.BornTimestamp == 0 || m.BornHost.Port == 0 {
		t.Fatalf("defaults not forwarded: %+v", m)
	}
	for _, call := range []func() error{
		func() error { _, err := fc.CreateTopic(ctx, &pb.CreateTopicRequest{Name: "T"}); return err },
		func() error {
			_, err := fc.CommitOffset(ctx, &pb.CommitOffsetRequest{Commits: []*pb.OffsetCommit{{Group: "g", Topic: "T"}}})
			return err
		},
		func() error { _, err := fc.DeleteTopic(ctx, &pb.DeleteTopicRequest{Name: "T"}); return err },
		func() error {
			_, err := fc.Join(ctx, &pb.JoinRequest{Id: "n4", RaftAddr: "h:1", ApiAddr: "h:2"})
			return err
		},
		func() error { _, err := fc.Remove(ctx, &pb.RemoveRequest{Id: "n4"}); return err },
		func() error { _, err := fc.Transfer(ctx, &pb.TransferRequest{}); return err },
	} {
		if err := call(); err != nil {
			t.Fatalf("forwarded write: %v", err)
		}
	}
	want := "Send CreateTopic CommitOffsets DeleteTopic Join Remove Transfer"
	if got := strings.Join(leader.Calls(), " "); got != want {
		t.Fatalf("leader calls %q, want %q", got, want)
	}
}

// Two nodes that each think the other leads: one hop, then a clear error.
func TestForwardOneHopOnly(t *testing.T) {
	a := &recBackend{err: ErrNotLeader}
	b := &recBackend{err: ErrNotLeader}
	aAddr, ac, _ := startServer(t, a)
	bAddr, _, _ := startServer(t, b)
	a.SetStatus(wire.ClusterStatus{ID: "a", LeaderID: "b", LeaderAPIAddr: bAddr})
	b.SetStatus(wire.ClusterStatus{ID: "b", LeaderID: "a", LeaderAPIAddr: aAddr})

	_, err := sendOne(testCtx(t), ac)
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("err %v, want Unavailable", err)
	}
	reason, hint := wire.RetryReason(err)
	if reason != wire.ReasonNotLeader || hint != aAddr || !strings.Contains(err.Error(), "leader is "+aAddr) {
		t.Fatalf("reason %q hint %q err %v", reason, hint, err)
	}
	if !wire.NotSent(err) {
		t.Fatal("not-leader error must be retry-safe")
	}
	if len(a.Calls()) != 1 || len(b.Calls()) != 1 {
		t.Fatalf("calls a=%v b=%v", a.Calls(), b.Calls())
	}
}

func TestForwardNoLeaderAndUnreachable(t *testing.T) {
	ctx := testCtx(t)
	nb := &recBackend{err: ErrNotLeader, status: wire.ClusterStatus{ID: "n2"}}
	_, c, _ := startServer(t, nb)
	_, err := sendOne(ctx, c)
	if r, _ := wire.RetryReason(err); status.Code(err) != codes.Unavailable || r != wire.ReasonNoLeader {
		t.Fatalf("no leader: %v", err)
	}

	// A leader address nobody listens on: refused before sending, so safe.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	_ = lis.Close()
	nb2 := &recBackend{err: ErrNotLeader, status: wire.ClusterStatus{ID: "n2", LeaderID: "n1", LeaderAPIAddr: dead}}
	_, c2, _ := startServer(t, nb2)
	_, err = sendOne(ctx, c2)
	if status.Code(err) != codes.Unavailable || !wire.NotSent(err) {
		t.Fatalf("unreachable leader: %v", err)
	}
}

func TestErrorMapping(t *testing.T) {
	cases := []struct {
		err  error
		code codes.Code
		text string
	}{
		{fmt.Errorf("raft: %w", ErrOutcomeUnknown), codes.Unknown, "outcome unknown: the write may or may not have been applied"},
		{fmt.Errorf("x: %w", store.ErrTopicExists), codes.AlreadyExists, "topic exists"},
		{store.ErrNoSuchTopic, codes.NotFound, "no such topic"},
		{store.ErrBadQueue, codes.InvalidArgument, "queue id"},
		{store.ErrMessageTooLarge, codes.InvalidArgument, "too large"},
		{ErrNoLeader, codes.Unavailable, "no leader"},
		{context.DeadlineExceeded, codes.DeadlineExceeded, "deadline"},
		{context.Canceled, codes.Canceled, "canceled"},
		{errors.New("boom"), codes.Internal, "boom"},
	}
	for _, tc := range cases {
		b := &recBackend{err: tc.err, status: wire.ClusterStatus{ID: "n1", LeaderID: "n1"}}
		_, c, _ := startServer(t, b)
		_, err := c.CreateTopic(testCtx(t), &pb.CreateTopicRequest{Name: "T"})
		if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.text) {
			t.Errorf("%v: got %v, want %v containing %q", tc.err, err, tc.code, tc.text)
		}
	}
}

func TestHealthFollowsLeader(t *testing.T) {
	b := &recBackend{status: wire.ClusterStatus{ID: "n1"}}
	lisAddr, _, _ := startServer(t, b)
	hc := healthClient(t, lisAddr)
	ctx := testCtx(t)
	waitHealth(t, ctx, hc, healthpb.HealthCheckResponse_NOT_SERVING)
	b.SetStatus(wire.ClusterStatus{ID: "n1", LeaderID: "n1"})
	waitHealth(t, ctx, hc, healthpb.HealthCheckResponse_SERVING)
}

func waitHealth(t *testing.T, ctx context.Context, hc healthpb.HealthClient, want healthpb.HealthCheckResponse_ServingStatus) {
	t.Helper()
	for {
		r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: pb.RaftMQ_ServiceDesc.ServiceName})
		if err == nil && r.GetStatus() == want {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("health never became %v (last %v, %v)", want, r.GetStatus(), err)
		case <-time.After(5 * time.Millisecond):
		}
	}
}
