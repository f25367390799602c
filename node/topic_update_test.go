package node

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
	"github.com/raftmq/raftmq/store"
)

// UpdateTopic sent to a follower over gRPC is forwarded to the leader,
// replicated, and applied on every node; a shrink is refused everywhere.
func TestUpdateTopicThroughFollower(t *testing.T) {
	c := startCluster(t, 3)
	l := c.leader()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := l.CreateTopic(ctx, store.TopicConfig{Name: "T", Queues: 2, Perm: 6}); err != nil {
		t.Fatal(err)
	}
	var follower *Node
	for _, n := range c.nodes {
		if n != l {
			follower = n
		}
	}
	waitFor(t, "the follower to know the leader's API address", 15*time.Second, func() bool {
		return follower.Status().LeaderAPIAddr != ""
	})
	conn, err := grpc.NewClient(follower.APIAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	api := pb.NewRaftMQClient(conn)
	if _, err := api.UpdateTopic(ctx, &pb.UpdateTopicRequest{Name: "T", Queues: 8, Perm: 4}); err != nil {
		t.Fatalf("update through follower: %v", err)
	}
	_, err = api.UpdateTopic(ctx, &pb.UpdateTopicRequest{Name: "T", Queues: 3})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("shrink: %v, want InvalidArgument", err)
	}
	if _, err := api.UpdateTopic(ctx, &pb.UpdateTopicRequest{Name: "nope", Queues: 3}); status.Code(err) != codes.NotFound {
		t.Fatalf("unknown topic: %v, want NotFound", err)
	}
	c.send("grown", 16) // msgs spread over queues 0..3
	c.assertIdentical()
	want := store.TopicConfig{Name: "T", Queues: 8, Perm: 4}
	for _, n := range c.nodes {
		if got, _ := n.Store().Topic("T"); got != want {
			t.Fatalf("%s: topic %+v, want %+v", n.cfg.ID, got, want)
		}
	}
}
