package transport

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
)

func msg(topic string, q int32, body string, props ...*pb.Property) *pb.Message {
	return &pb.Message{Topic: topic, QueueId: q, Body: []byte(body), Properties: props}
}

// TestValidationCatalogue sends every RPC bad input and checks the code and
// that the backend (including its store) was never touched.
func TestValidationCatalogue(t *testing.T) {
	b := &recBackend{status: ClusterStatus{ID: "n1", LeaderID: "n1"}}
	_, c, _ := startServer(t, b)
	ctx := testCtx(t)
	long := strings.Repeat("t", MaxTopicLen+1)
	bigProps := []*pb.Property{{Key: "k", Value: strings.Repeat("v", MaxPropertiesLen)}}
	manyProps := make([]*pb.Property, MaxProperties+1)
	for i := range manyProps {
		manyProps[i] = &pb.Property{Key: "k", Value: "v"}
	}
	tooMany := make([]*pb.Message, MaxBatchMessages+1)
	for i := range tooMany {
		tooMany[i] = msg("T", 0, "x")
	}
	type call func(context.Context, pb.RaftMQClient) error
	send := func(ms ...*pb.Message) call {
		return func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.Send(ctx, &pb.SendRequest{Messages: ms})
			return err
		}
	}
	pull := func(r *pb.PullRequest) call {
		return func(ctx context.Context, c pb.RaftMQClient) error { _, err := c.Pull(ctx, r); return err }
	}
	cases := []struct {
		name string
		call call
	}{
		{"send/empty batch", send()},
		{"send/too many", send(tooMany...)},
		{"send/empty topic", send(msg("", 0, "x"))},
		{"send/long topic", send(msg(long, 0, "x"))},
		{"send/illegal topic", send(msg("a b", 0, "x"))},
		{"send/slash topic", send(msg("a/b", 0, "x"))},
		{"send/negative queue", send(msg("T", -2, "x"))},
		{"send/queue too big", send(msg("T", MaxQueueID+1, "x"))},
		{"send/body too big", send(&pb.Message{Topic: "T", Body: make([]byte, 4<<20+1)})},
		{"send/props too big", send(msg("T", 0, "x", bigProps...))},
		{"send/too many props", send(msg("T", 0, "x", manyProps...))},
		{"send/empty prop key", send(msg("T", 0, "x", &pb.Property{Value: "v"}))},
		{"send/separator in prop", send(msg("T", 0, "x", &pb.Property{Key: "k", Value: "a\x01b"}))},
		{"send/bad born host", send(&pb.Message{Topic: "T", BornHost: "nohost"})},
		{"send/negative born", send(&pb.Message{Topic: "T", BornTimestamp: -1})},
		{"send/second message bad", send(msg("T", 0, "x"), msg("", 0, "x"))},
		{"pull/bad topic", pull(&pb.PullRequest{Topic: "a b"})},
		{"pull/negative queue", pull(&pb.PullRequest{Topic: "T", QueueId: -1})},
		{"pull/negative offset", pull(&pb.PullRequest{Topic: "T", Offset: -1})},
		{"pull/max messages", pull(&pb.PullRequest{Topic: "T", MaxMessages: MaxPullMessages + 1})},
		{"pull/negative max messages", pull(&pb.PullRequest{Topic: "T", MaxMessages: -1})},
		{"pull/max bytes", pull(&pb.PullRequest{Topic: "T", MaxBytes: -5})},
		{"pull/max wait", pull(&pb.PullRequest{Topic: "T", MaxWaitMs: MaxWaitMs + 1})},
		{"pull/long tag", pull(&pb.PullRequest{Topic: "T", Tag: strings.Repeat("x", MaxKeyLen+1)})},
		{"querykey/no key", func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.QueryByKey(ctx, &pb.QueryByKeyRequest{Topic: "T"})
			return err
		}},
		{"querykey/bad range", func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.QueryByKey(ctx, &pb.QueryByKeyRequest{Topic: "T", Key: "k", BeginTimestamp: 10, EndTimestamp: 5})
			return err
		}},
		{"querymsgid/empty", func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.QueryByMsgID(ctx, &pb.QueryByMsgIDRequest{})
			return err
		}},
		{"querymsgid/bad topic", func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.QueryByMsgID(ctx, &pb.QueryByMsgIDRequest{Topic: "a b", MsgId: "x"})
			return err
		}},
		{"queryoffset/negative", func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.QueryByOffset(ctx, &pb.QueryByOffsetRequest{PhysicalOffset: -1})
			return err
		}},
		{"commit/empty", func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.CommitOffset(ctx, &pb.CommitOffsetRequest{})
			return err
		}},
		{"commit/no group", func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.CommitOffset(ctx, &pb.CommitOffsetRequest{Commits: []*pb.OffsetCommit{{Topic: "T"}}})
			return err
		}},
		{"commit/negative offset", func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.CommitOffset(ctx, &pb.CommitOffsetRequest{Commits: []*pb.OffsetCommit{{Group: "g", Topic: "T", Offset: -1}}})
			return err
		}},
		{"queryoffset/no group", func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.QueryOffset(ctx, &pb.QueryOffsetRequest{Topic: "T"})
			return err
		}},
		{"queueoffsets/bad queue", func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.QueueOffsets(ctx, &pb.QueueOffsetsRequest{Topic: "T", QueueId: -1})
			return err
		}},
		{"bytime/negative ts", func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.OffsetByTime(ctx, &pb.OffsetByTimeRequest{Topic: "T", Timestamp: -1})
			return err
		}},
		{"bytime/bad boundary", func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.OffsetByTime(ctx, &pb.OffsetByTimeRequest{Topic: "T", Boundary: 7})
			return err
		}},
		{"create/bad name", func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.CreateTopic(ctx, &pb.CreateTopicRequest{Name: "a.b"})
			return err
		}},
		{"create/too many queues", func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.CreateTopic(ctx, &pb.CreateTopicRequest{Name: "T", Queues: MaxQueues + 1})
			return err
		}},
		{"create/bad perm", func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.CreateTopic(ctx, &pb.CreateTopicRequest{Name: "T", Perm: 9})
			return err
		}},
		{"describe/empty", func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.DescribeTopic(ctx, &pb.DescribeTopicRequest{})
			return err
		}},
		{"delete/empty", func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.DeleteTopic(ctx, &pb.DeleteTopicRequest{})
			return err
		}},
		{"join/no id", func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.Join(ctx, &pb.JoinRequest{RaftAddr: "h:1", ApiAddr: "h:2"})
			return err
		}},
		{"join/bad addr", func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.Join(ctx, &pb.JoinRequest{Id: "n4", RaftAddr: "h", ApiAddr: "h:2"})
			return err
		}},
		{"remove/no id", func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.Remove(ctx, &pb.RemoveRequest{})
			return err
		}},
		{"transfer/long id", func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.Transfer(ctx, &pb.TransferRequest{Id: strings.Repeat("x", MaxIDLen+1)})
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call(ctx, c)
			if got := status.Code(err); got != codes.InvalidArgument {
				t.Fatalf("code %v (%v), want InvalidArgument", got, err)
			}
			if msg := status.Convert(err).Message(); msg == "" {
				t.Fatal("empty error message")
			}
			if calls := b.Calls(); len(calls) != 0 {
				t.Fatalf("backend touched on bad input: %v", calls)
			}
		})
	}
}

func TestValidTopic(t *testing.T) {
	for _, ok := range []string{"T", "my-topic_1", "%RETRY%g", "a|b", strings.Repeat("x", MaxTopicLen)} {
		if err := ValidTopic(ok); err != nil {
			t.Errorf("ValidTopic(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", " ", "a.b", "ä", "a\x00", strings.Repeat("x", MaxTopicLen+1)} {
		if ValidTopic(bad) == nil {
			t.Errorf("ValidTopic(%q) = nil", bad)
		}
	}
}
