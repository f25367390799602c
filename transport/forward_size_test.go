package transport

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
	"github.com/raftmq/raftmq/wire"
)

// TestForwardLargeSend: a Send of 4 MiB bodies close to the server's
// message limit, sent to a follower, reaches the leader whole.
func TestForwardLargeSend(t *testing.T) {
	leader := &recBackend{status: wire.ClusterStatus{ID: "n1", LeaderID: "n1"}}
	leaderAddr, _, _ := startServer(t, leader)
	follower := &recBackend{err: fmt.Errorf("node: %w", ErrNotLeader),
		status: wire.ClusterStatus{ID: "n2", LeaderID: "n1", LeaderAPIAddr: leaderAddr}}
	_, fc, _ := startServer(t, follower)
	const n, size = 15, 4 << 20 // 60 MiB
	req := &pb.SendRequest{}
	for i := range n {
		req.Messages = append(req.Messages, &pb.Message{Topic: "T", QueueId: 0, Body: bytes.Repeat([]byte{byte('a' + i)}, size)})
	}
	// 60 MiB through two servers: under -race on a loaded 2-core machine
	// this took over testCtx's 10 s once; the test checks sizes, not speed.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := fc.Send(ctx, req)
	if err != nil || len(resp.GetResults()) != n {
		t.Fatalf("send of %d × 4 MiB via a follower: %v (%d results)", n, err, len(resp.GetResults()))
	}
	if len(leader.sent) != 1 || len(leader.sent[0]) != n || !bytes.Equal(leader.sent[0][n-1].Body, req.Messages[n-1].Body) {
		t.Fatalf("leader got %d sends", len(leader.sent))
	}
}
