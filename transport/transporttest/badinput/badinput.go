package badinput

import (
	"context"
	"strings"

	"google.golang.org/grpc/codes"

	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
)

// Limits are the server's request limits (transport's constants and the
// node's body limit).
type Limits struct {
	MaxTopicLen, MaxPropertiesLen, MaxProperties int
	MaxQueueID, MaxQueues                        int32
	MaxBatchMessages, MaxBody                    int
	MaxPullMessages, MaxPullBytes                int32
	MaxWaitMs                                    int64
	MaxKeyLen, MaxIDLen                          int
}

// Call performs one RPC and returns its error.
type Call func(context.Context, pb.RaftMQClient) error

// Case is one bad request and the gRPC code it must fail with.
type Case struct {
	Name string
	Call Call
	Code codes.Code
}

// Topic is the (valid) topic the cases use where a field other than the
// topic is the bad one.
const Topic = "badinput"

func msg(topic string, q int32, body string, props ...*pb.Property) *pb.Message {
	return &pb.Message{Topic: topic, QueueId: q, Body: []byte(body), Properties: props}
}

func send(ms ...*pb.Message) Call {
	return func(ctx context.Context, c pb.RaftMQClient) error {
		_, err := c.Send(ctx, &pb.SendRequest{Messages: ms})
		return err
	}
}

func pull(r *pb.PullRequest) Call {
	return func(ctx context.Context, c pb.RaftMQClient) error { _, err := c.Pull(ctx, r); return err }
}

func commit(cs ...*pb.OffsetCommit) Call {
	return func(ctx context.Context, c pb.RaftMQClient) error {
		_, err := c.CommitOffset(ctx, &pb.CommitOffsetRequest{Commits: cs})
		return err
	}
}

// Cases returns the catalogue for the given limits. Every case expects
// codes.InvalidArgument.
func Cases(l Limits) []Case {
	T := Topic
	long := strings.Repeat("t", l.MaxTopicLen+1)
	bigProps := []*pb.Property{{Key: "k", Value: strings.Repeat("v", l.MaxPropertiesLen)}}
	manyProps := make([]*pb.Property, l.MaxProperties+1)
	for i := range manyProps {
		manyProps[i] = &pb.Property{Key: "k", Value: "v"}
	}
	tooMany := make([]*pb.Message, l.MaxBatchMessages+1)
	tooManyCommits := make([]*pb.OffsetCommit, l.MaxBatchMessages+1)
	for i := range tooMany {
		tooMany[i] = msg(T, 0, "x")
		tooManyCommits[i] = &pb.OffsetCommit{Group: "g", Topic: T}
	}
	cs := []Case{
		{Name: "send/empty batch", Call: send()},
		{Name: "send/too many", Call: send(tooMany...)},
		{Name: "send/empty topic", Call: send(msg("", 0, "x"))},
		{Name: "send/long topic", Call: send(msg(long, 0, "x"))},
		{Name: "send/illegal topic", Call: send(msg("a b", 0, "x"))},
		{Name: "send/slash topic", Call: send(msg("a/b", 0, "x"))},
		{Name: "send/non-ascii topic", Call: send(msg("tö", 0, "x"))},
		{Name: "send/negative queue", Call: send(msg(T, -2, "x"))},
		{Name: "send/queue too big", Call: send(msg(T, l.MaxQueueID+1, "x"))},
		{Name: "send/body too big", Call: send(&pb.Message{Topic: T, QueueId: -1, Body: make([]byte, l.MaxBody+1)})},
		{Name: "send/props too big", Call: send(msg(T, 0, "x", bigProps...))},
		{Name: "send/too many props", Call: send(msg(T, 0, "x", manyProps...))},
		{Name: "send/empty prop key", Call: send(msg(T, 0, "x", &pb.Property{Value: "v"}))},
		{Name: "send/separator in prop", Call: send(msg(T, 0, "x", &pb.Property{Key: "k", Value: "a\x01b"}))},
		{Name: "send/bad born host", Call: send(&pb.Message{Topic: T, BornHost: "nohost"})},
		{Name: "send/negative born", Call: send(&pb.Message{Topic: T, BornTimestamp: -1})},
		{Name: "send/second message bad", Call: send(msg(T, 0, "x"), msg("", 0, "x"))},
		{Name: "pull/empty topic", Call: pull(&pb.PullRequest{})},
		{Name: "pull/bad topic", Call: pull(&pb.PullRequest{Topic: "a b"})},
		{Name: "pull/negative queue", Call: pull(&pb.PullRequest{Topic: T, QueueId: -1})},
		{Name: "pull/queue too big", Call: pull(&pb.PullRequest{Topic: T, QueueId: l.MaxQueueID + 1})},
		{Name: "pull/negative offset", Call: pull(&pb.PullRequest{Topic: T, Offset: -1})},
		{Name: "pull/max messages", Call: pull(&pb.PullRequest{Topic: T, MaxMessages: l.MaxPullMessages + 1})},
		{Name: "pull/negative max messages", Call: pull(&pb.PullRequest{Topic: T, MaxMessages: -1})},
		{Name: "pull/negative max bytes", Call: pull(&pb.PullRequest{Topic: T, MaxBytes: -5})},
		{Name: "pull/max bytes", Call: pull(&pb.PullRequest{Topic: T, MaxBytes: l.MaxPullBytes + 1})},
		{Name: "pull/max wait", Call: pull(&pb.PullRequest{Topic: T, MaxWaitMs: l.MaxWaitMs + 1})},
		{Name: "pull/negative wait", Call: pull(&pb.PullRequest{Topic: T, MaxWaitMs: -1})},
		{Name: "pull/long tag", Call: pull(&pb.PullRequest{Topic: T, Tag: strings.Repeat("x", l.MaxKeyLen+1)})},
		{Name: "querykey/no key", Call: func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.QueryByKey(ctx, &pb.QueryByKeyRequest{Topic: T})
			return err
		}},
		{Name: "querykey/bad topic", Call: func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.QueryByKey(ctx, &pb.QueryByKeyRequest{Topic: "a b", Key: "k"})
			return err
		}},
		{Name: "querykey/long key", Call: func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.QueryByKey(ctx, &pb.QueryByKeyRequest{Topic: T, Key: strings.Repeat("k", l.MaxKeyLen+1)})
			return err
		}},
		{Name: "querykey/bad range", Call: func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.QueryByKey(ctx, &pb.QueryByKeyRequest{Topic: T, Key: "k", BeginTimestamp: 10, EndTimestamp: 5})
			return err
		}},
		{Name: "querykey/negative max", Call: func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.QueryByKey(ctx, &pb.QueryByKeyRequest{Topic: T, Key: "k", MaxMessages: -1})
			return err
		}},
		{Name: "querymsgid/empty", Call: func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.QueryByMsgID(ctx, &pb.QueryByMsgIDRequest{})
			return err
		}},
		{Name: "querymsgid/bad topic", Call: func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.QueryByMsgID(ctx, &pb.QueryByMsgIDRequest{Topic: "a b", MsgId: "x"})
			return err
		}},
		{Name: "queryoffset/negative", Call: func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.QueryByOffset(ctx, &pb.QueryByOffsetRequest{PhysicalOffset: -1})
			return err
		}},
		{Name: "commit/empty", Call: commit()},
		{Name: "commit/too many", Call: commit(tooManyCommits...)},
		{Name: "commit/no group", Call: commit(&pb.OffsetCommit{Topic: T})},
		{Name: "commit/long group", Call: commit(&pb.OffsetCommit{Group: strings.Repeat("g", 256), Topic: T})},
		{Name: "commit/bad topic", Call: commit(&pb.OffsetCommit{Group: "g", Topic: "a b"})},
		{Name: "commit/bad queue", Call: commit(&pb.OffsetCommit{Group: "g", Topic: T, QueueId: -1})},
		{Name: "commit/negative offset", Call: commit(&pb.OffsetCommit{Group: "g", Topic: T, Offset: -1})},
		{Name: "commit/second bad", Call: commit(&pb.OffsetCommit{Group: "g", Topic: T}, &pb.OffsetCommit{Group: "g", Topic: T, Offset: -1})},
		{Name: "queryoffset/no group", Call: func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.QueryOffset(ctx, &pb.QueryOffsetRequest{Topic: T})
			return err
		}},
		{Name: "queryoffset/bad queue", Call: func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.QueryOffset(ctx, &pb.QueryOffsetRequest{Group: "g", Topic: T, QueueId: l.MaxQueueID + 1})
			return err
		}},
		{Name: "describegroup/no group", Call: func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.DescribeGroup(ctx, &pb.DescribeGroupRequest{Topic: T})
			return err
		}},
		{Name: "describegroup/long group", Call: func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.DescribeGroup(ctx, &pb.DescribeGroupRequest{Group: strings.Repeat("g", 256)})
			return err
		}},
		{Name: "describegroup/bad topic", Call: func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.DescribeGroup(ctx, &pb.DescribeGroupRequest{Group: "g", Topic: "a b"})
			return err
		}},
		{Name: "joingroup/no group", Call: func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.JoinGroup(ctx, &pb.JoinGroupRequest{ClientId: "c"})
			return err
		}},
		{Name: "joingroup/long client id", Call: func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.JoinGroup(ctx, &pb.JoinGroupRequest{Group: "g", ClientId: strings.Repeat("c", 256)})
			return err
		}},
		{Name: "joingroup/leave without client id", Call: func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.JoinGroup(ctx, &pb.JoinGroupRequest{Group: "g", Leave: true})
			return err
		}},
		{Name: "queueoffsets/bad queue", Call: func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.QueueOffsets(ctx, &pb.QueueOffsetsRequest{Topic: T, QueueId: -1})
			return err
		}},
		{Name: "queueoffsets/bad topic", Call: func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.QueueOffsets(ctx, &pb.QueueOffsetsRequest{Topic: ""})
			return err
		}},
		{Name: "bytime/negative ts", Call: func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.OffsetByTime(ctx, &pb.OffsetByTimeRequest{Topic: T, Timestamp: -1})
			return err
		}},
		{Name: "bytime/bad boundary", Call: func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.OffsetByTime(ctx, &pb.OffsetByTimeRequest{Topic: T, Boundary: 7})
			return err
		}},
		{Name: "create/bad name", Call: func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.CreateTopic(ctx, &pb.CreateTopicRequest{Name: "a.b"})
			return err
		}},
		{Name: "create/long name", Call: func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.CreateTopic(ctx, &pb.CreateTopicRequest{Name: long})
			return err
		}},
		{Name: "create/too many queues", Call: func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.CreateTopic(ctx, &pb.CreateTopicRequest{Name: T, Queues: l.MaxQueues + 1})
			return err
		}},
		{Name: "create/negative queues", Call: func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.CreateTopic(ctx, &pb.CreateTopicRequest{Name: T, Queues: -1})
			return err
		}},
		{Name: "create/bad perm", Call: func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.CreateTopic(ctx, &pb.CreateTopicRequest{Name: T, Perm: 9})
			return err
		}},
		{Name: "describe/empty", Call: func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.DescribeTopic(ctx, &pb.DescribeTopicRequest{})
			return err
		}},
		{Name: "delete/empty", Call: func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.DeleteTopic(ctx, &pb.DeleteTopicRequest{})
			return err
		}},
		{Name: "delete/illegal", Call: func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.DeleteTopic(ctx, &pb.DeleteTopicRequest{Name: "../x"})
			return err
		}},
		{Name: "join/no id", Call: func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.Join(ctx, &pb.JoinRequest{RaftAddr: "h:1", ApiAddr: "h:2"})
			return err
		}},
		{Name: "join/bad raft addr", Call: func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.Join(ctx, &pb.JoinRequest{Id: "n9", RaftAddr: "h", ApiAddr: "h:2"})
			return err
		}},
		{Name: "join/bad api addr", Call: func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.Join(ctx, &pb.JoinRequest{Id: "n9", RaftAddr: "h:1", ApiAddr: "h:"})
			return err
		}},
		{Name: "join/long id", Call: func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.Join(ctx, &pb.JoinRequest{Id: strings.Repeat("x", l.MaxIDLen+1), RaftAddr: "h:1", ApiAddr: "h:2"})
			return err
		}},
		{Name: "remove/no id", Call: func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.Remove(ctx, &pb.RemoveRequest{})
			return err
		}},
		{Name: "transfer/long id", Call: func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.Transfer(ctx, &pb.TransferRequest{Id: strings.Repeat("x", l.MaxIDLen+1)})
			return err
		}},
	}
	for i := range cs {
		cs[i].Code = codes.InvalidArgument
	}
	return cs
}
