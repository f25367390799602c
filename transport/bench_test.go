package transport_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/raftmq/raftmq/message"
	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/transport"
	"github.com/raftmq/raftmq/transport/transporttest"
	"github.com/raftmq/raftmq/wire"
)

// notLeader is a follower backend: every write says "not the leader".
type notLeader struct {
	transport.Backend
	leader string
}

func (n notLeader) Send(context.Context, []message.Message) ([]store.PutResult, error) {
	return nil, transport.ErrNotLeader
}

func (n notLeader) Status() wire.ClusterStatus {
	return wire.ClusterStatus{ID: "f", LeaderID: "local", LeaderAPIAddr: n.leader}
}

// BenchmarkSendPath interleaves, per iteration, one batch applied straight to
// the backend (the baseline), one sent over gRPC to the leader and one sent
// to a follower that forwards it, and reports the costs as ratios to the
// baseline, measured in the same run.
func BenchmarkSendPath(b *testing.B) {
	for _, batch := range []int{1, 32} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) { benchSendPath(b, batch) })
	}
}

func benchSendPath(b *testing.B, batch int) {
	s := transporttest.StartT(b)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	fsrv := transport.NewServer(notLeader{Backend: s.Backend, leader: s.Addr}, transport.ServerOptions{})
	go func() { _ = fsrv.Serve(lis) }()
	b.Cleanup(func() { fsrv.Stop(context.Background()) })
	leader, follower := dial(b, s.Addr), dial(b, lis.Addr().String())
	ctx := context.Background()
	body := make([]byte, 1024)
	req := &pb.SendRequest{}
	var direct []message.Message
	for i := 0; i < batch; i++ {
		req.Messages = append(req.Messages, &pb.Message{Topic: "B", QueueId: 0, Body: body, BornTimestamp: 1})
		direct = append(direct, message.Message{Topic: "B", QueueID: 0, Body: body, BornTimestamp: 1})
	}
	var tDirect, tGRPC, tFwd time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := s.Backend.Send(ctx, direct); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := leader.Send(ctx, req); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if _, err := follower.Send(ctx, req); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		tDirect, tGRPC, tFwd = tDirect+t1.Sub(t0), tGRPC+t2.Sub(t1), tFwd+t3.Sub(t2)
	}
	n := float64(b.N)
	b.ReportMetric(float64(tDirect.Microseconds())/n, "direct-µs/op")
	b.ReportMetric(float64(tGRPC.Microseconds())/n, "grpc-µs/op")
	b.ReportMetric(float64(tFwd.Microseconds())/n, "forwarded-µs/op")
	b.ReportMetric(float64(tGRPC)/float64(tDirect), "grpc/direct")
	b.ReportMetric(float64(tFwd)/float64(tGRPC), "forwarded/grpc")
}
