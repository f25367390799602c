package transport_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/message"
	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
	"github.com/raftmq/raftmq/transport"
	"github.com/raftmq/raftmq/transport/transporttest"
)

func dial(t testing.TB, addr string) pb.RaftMQClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return pb.NewRaftMQClient(cc)
}

// Against a real store: send, pull, long-poll wake-up, queries, offsets and
// the NotFound / AlreadyExists mapping.
func TestServerOverRealStore(t *testing.T) {
	s := transporttest.StartT(t)
	c := dial(t, s.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	if _, err := c.CreateTopic(ctx, &pb.CreateTopicRequest{Name: "T", Queues: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(ctx, &pb.CreateTopicRequest{Name: "T", Queues: 2}); status.Code(err) != codes.AlreadyExists {
		t.Fatalf("second create: %v", err)
	}
	msg := &pb.Message{Topic: "T", QueueId: 1, Body: []byte("hello"), Properties: []*pb.Property{
		{Key: message.PropertyUniqKey, Value: "ID-1"}, {Key: message.PropertyKeys, Value: "k1"}, {Key: message.PropertyTags, Value: "a"}}}
	resp, err := c.Send(ctx, &pb.SendRequest{Messages: []*pb.Message{msg}})
	if err != nil {
		t.Fatal(err)
	}
	r := resp.GetResults()[0]
	if r.GetErrorCode() != 0 || r.GetQueueOffset() != 0 || r.GetMsgId() != "ID-1" {
		t.Fatalf("result %v", r)
	}
	// A bad queue for an existing topic is a per-message error.
	resp, err = c.Send(ctx, &pb.SendRequest{Messages: []*pb.Message{{Topic: "T", QueueId: 5, Body: []byte("x")}}})
	if err != nil || codes.Code(resp.GetResults()[0].GetErrorCode()) != codes.InvalidArgument {
		t.Fatalf("bad queue: %v %v", err, resp)
	}

	pr, err := c.Pull(ctx, &pb.PullRequest{Topic: "T", QueueId: 1})
	if err != nil || pr.GetStatus() != pb.PullStatus_PULL_STATUS_FOUND || len(pr.GetMessages()) != 1 {
		t.Fatalf("pull: %v %v", err, pr)
	}
	got := pr.GetMessages()[0]
	if string(got.GetBody()) != "hello" || got.GetMsgId() != "ID-1" || transport.PropertyValue(got.GetProperties(), "KEYS") != "k1" {
		t.Fatalf("message %v", got)
	}

	// Long poll: a pull at the next offset wakes when a message arrives.
	type res struct {
		r   *pb.PullResponse
		err error
	}
	ch := make(chan res, 1)
	go func() {
		r, err := c.Pull(ctx, &pb.PullRequest{Topic: "T", QueueId: 1, Offset: 1, MaxWaitMs: 10_000})
		ch <- res{r, err}
	}()
	// Whether the send lands before or during the wait, the pull must
	// return it (and not wait out the 10 s).
	if _, err := c.Send(ctx, &pb.SendRequest{Messages: []*pb.Message{{Topic: "T", QueueId: 1, Body: []byte("second")}}}); err != nil {
		t.Fatal(err)
	}
	lp := <-ch
	if lp.err != nil || len(lp.r.GetMessages()) != 1 || string(lp.r.GetMessages()[0].GetBody()) != "second" {
		t.Fatalf("long poll: %v %v", lp.err, lp.r)
	}
	// Long poll that times out returns the overflow status, not an error.
	start := time.Now()
	pr, err = c.Pull(ctx, &pb.PullRequest{Topic: "T", QueueId: 1, Offset: 2, MaxWaitMs: 50})
	if err != nil || pr.GetStatus() != pb.PullStatus_PULL_STATUS_OFFSET_OVERFLOW_ONE || time.Since(start) < 50*time.Millisecond {
		t.Fatalf("timed-out poll: %v %v after %v", err, pr, time.Since(start))
	}

	keyed, err := c.QueryByKey(ctx, &pb.QueryByKeyRequest{Topic: "T", Key: "k1"})
	if err != nil || len(keyed.GetMessages()) != 1 {
		t.Fatalf("by key: %v %v", err, keyed)
	}
	byID, err := c.QueryByMsgID(ctx, &pb.QueryByMsgIDRequest{MsgId: "ID-1"})
	if err != nil || len(byID.GetMessages()) != 1 {
		t.Fatalf("by id: %v %v", err, byID)
	}
	byOff, err := c.QueryByMsgID(ctx, &pb.QueryByMsgIDRequest{MsgId: got.GetOffsetMsgId()})
	if err != nil || len(byOff.GetMessages()) != 1 || byOff.GetMessages()[0].GetPhysicalOffset() != got.GetPhysicalOffset() {
		t.Fatalf("by offset msg id: %v %v", err, byOff)
	}
	if _, err := c.QueryByMsgID(ctx, &pb.QueryByMsgIDRequest{MsgId: "nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("missing id: %v", err)
	}
	if _, err := c.CommitOffset(ctx, &pb.CommitOffsetRequest{Commits: []*pb.OffsetCommit{{Group: "g", Topic: "T", QueueId: 1, Offset: 2}}}); err != nil {
		t.Fatal(err)
	}
	qo, err := c.QueryOffset(ctx, &pb.QueryOffsetRequest{Group: "g", Topic: "T", QueueId: 1})
	if err != nil || !qo.GetFound() || qo.GetOffset() != 2 {
		t.Fatalf("query offset: %v %v", err, qo)
	}
	if _, err := c.DescribeTopic(ctx, &pb.DescribeTopicRequest{Name: "nosuch"}); status.Code(err) != codes.NotFound {
		t.Fatalf("describe missing: %v", err)
	}
	d, err := c.DescribeTopic(ctx, &pb.DescribeTopicRequest{Name: "T"})
	if err != nil || len(d.GetQueueOffsets()) != 2 || d.GetQueueOffsets()[1].GetMaxOffset() != 2 {
		t.Fatalf("describe: %v %v", err, d)
	}
}
