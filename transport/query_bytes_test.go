package transport_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/raftmq/raftmq/message"
	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
	"github.com/raftmq/raftmq/transport"
	"github.com/raftmq/raftmq/transport/transporttest"
	"github.com/raftmq/raftmq/wire"
)

// TestLargeMessagesFitEveryAnswer: 4 MiB bodies (the store's limit) go
// through Send, come back from a Pull whose max_bytes is smaller than one
// message (at least one message per pull), and a query by key that matches
// 68 MiB of them answers within MaxQueryBytes instead of exceeding the gRPC
// message limit.
func TestLargeMessagesFitEveryAnswer(t *testing.T) {
	s := transporttest.StartT(t)
	cc, err := grpc.NewClient(s.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(wire.MaxResponseBytes), grpc.MaxCallSendMsgSize(wire.MaxRequestBytes)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	c := pb.NewRaftMQClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n, size = 17, 4 << 20
	bodies := make([][]byte, n)
	for i := range bodies {
		bodies[i] = bytes.Repeat([]byte{'a' + byte(i)}, size)
		msg := &pb.Message{Topic: "Big", QueueId: 0, Body: bodies[i], Properties: []*pb.Property{{Key: message.PropertyKeys, Value: "big"}}}
		resp, err := c.Send(ctx, &pb.SendRequest{Messages: []*pb.Message{msg}})
		if err != nil || resp.GetResults()[0].GetErrorCode() != 0 {
			t.Fatalf("send %d: %v %v", i, err, resp)
		}
	}
	pr, err := c.Pull(ctx, &pb.PullRequest{Topic: "Big", QueueId: 0, Offset: 3, MaxBytes: 1 << 20})
	if err != nil || len(pr.GetMessages()) != 1 || !bytes.Equal(pr.GetMessages()[0].GetBody(), bodies[3]) || pr.GetNextOffset() != 4 {
		t.Fatalf("pull of a 4 MiB message with max_bytes 1 MiB: %v, %d messages, next %d", err, len(pr.GetMessages()), pr.GetNextOffset())
	}
	keyed, err := c.QueryByKey(ctx, &pb.QueryByKeyRequest{Topic: "Big", Key: "big", MaxMessages: 64})
	if err != nil {
		t.Fatalf("query by key matching %d MiB: %v", n*size>>20, err)
	}
	total := 0
	for _, m := range keyed.GetMessages() {
		total += len(m.GetBody())
		if len(m.GetBody()) != size {
			t.Fatalf("query returned a body of %d bytes", len(m.GetBody()))
		}
	}
	if len(keyed.GetMessages()) == 0 || total > transport.MaxQueryBytes {
		t.Fatalf("query by key: %d messages, %d bytes; want at least one and at most %d bytes", len(keyed.GetMessages()), total, transport.MaxQueryBytes)
	}
}
