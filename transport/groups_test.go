package transport_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/transport/transporttest"
)

// ListGroups and DescribeGroup over a real store: committed offsets, queue
// ends and lag per queue, a commit that moves an offset back, the
// NotFound and InvalidArgument answers, and a lagging node forwarding both
// reads to the leader.
func TestGroupsOverRealStore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	leader := transporttest.StartT(t)
	c := dial(t, leader.Addr)
	if _, err := c.CreateTopic(ctx, &pb.CreateTopicRequest{Name: "T", Queues: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(ctx, &pb.CreateTopicRequest{Name: "U", Queues: 1}); err != nil {
		t.Fatal(err)
	}
	var msgs []*pb.Message
	for i := range 7 { // T-0: 4 messages, T-1: 3
		msgs = append(msgs, &pb.Message{Topic: "T", QueueId: int32(i % 2), Body: []byte("x")})
	}
	if _, err := c.Send(ctx, &pb.SendRequest{Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	commit := func(cs ...*pb.OffsetCommit) {
		t.Helper()
		if _, err := c.CommitOffset(ctx, &pb.CommitOffsetRequest{Commits: cs}); err != nil {
			t.Fatal(err)
		}
	}
	commit(&pb.OffsetCommit{Group: "g", Topic: "T", QueueId: 0, Offset: 3})
	commit(&pb.OffsetCommit{Group: "g", Topic: "T", QueueId: 0, Offset: 1}) // back: a reset
	commit(&pb.OffsetCommit{Group: "h", Topic: "U", QueueId: 0, Offset: 0})

	wantG := &pb.DescribeGroupResponse{Group: "g", Queues: []*pb.GroupQueueProgress{
		{Topic: "T", QueueId: 0, Committed: true, CommittedOffset: 1, MaxOffset: 4, Lag: 3},
		{Topic: "T", QueueId: 1, MaxOffset: 3, Lag: 3},
	}}
	wantList := &pb.ListGroupsResponse{Groups: []*pb.GroupSummary{
		{Group: "g", Topics: []string{"T"}, Lag: 6},
		{Group: "h", Topics: []string{"U"}, Lag: 0},
	}}
	check := func(c pb.RaftMQClient, via string) {
		t.Helper()
		got, err := c.DescribeGroup(ctx, &pb.DescribeGroupRequest{Group: "g"})
		if err != nil || !proto.Equal(got, wantG) {
			t.Fatalf("%s: describe g: %v\n got %v\nwant %v", via, err, got, wantG)
		}
		list, err := c.ListGroups(ctx, &pb.ListGroupsRequest{})
		if err != nil || !proto.Equal(list, wantList) {
			t.Fatalf("%s: list: %v\n got %v\nwant %v", via, err, list, wantList)
		}
	}
	check(c, "leader")

	// A topic the group has no offsets in lists every queue uncommitted.
	got, err := c.DescribeGroup(ctx, &pb.DescribeGroupRequest{Group: "h", Topic: "T"})
	if err != nil || len(got.GetQueues()) != 2 || got.GetQueues()[0].GetCommitted() || got.GetQueues()[0].GetLag() != 4 {
		t.Fatalf("describe h -t T: %v %v", err, got)
	}
	for _, tc := range []struct {
		req  *pb.DescribeGroupRequest
		code codes.Code
	}{
		{&pb.DescribeGroupRequest{Group: "nobody"}, codes.NotFound},
		{&pb.DescribeGroupRequest{Group: "g", Topic: "nosuch"}, codes.NotFound},
		{&pb.DescribeGroupRequest{}, codes.InvalidArgument},
		{&pb.DescribeGroupRequest{Group: "g", Topic: "bad topic!"}, codes.InvalidArgument},
		{&pb.DescribeGroupRequest{Group: string(make([]byte, 256))}, codes.InvalidArgument},
	} {
		if _, err := c.DescribeGroup(ctx, tc.req); status.Code(err) != tc.code {
			t.Errorf("describe %v: %v, want %v", tc.req, err, tc.code)
		}
	}

	// A node whose store lags (an older commit of g) forwards both reads.
	local, addr := startStaleFollower(t, leader.Addr)
	if err := local.CreateTopic(ctx, store.TopicConfig{Name: "T", Queues: 2}); err != nil {
		t.Fatal(err)
	}
	if err := local.CommitOffsets(ctx, []store.OffsetCommit{{Group: "g", Topic: "T", QueueID: 0, Offset: 3}}); err != nil {
		t.Fatal(err)
	}
	check(dial(t, addr), "lagging node")
}
