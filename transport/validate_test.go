package transport

import (
	"strings"
	"testing"

	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/message"
	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
	"github.com/raftmq/raftmq/transport/transporttest/badinput"
	"github.com/raftmq/raftmq/wire"
)

func msg(topic string, q int32, body string, props ...*pb.Property) *pb.Message {
	return &pb.Message{Topic: topic, QueueId: q, Body: []byte(body), Properties: props}
}

// Limits are this package's request limits, for the shared catalogue.
func Limits() badinput.Limits {
	return badinput.Limits{MaxTopicLen: message.MaxTopicLen, MaxPropertiesLen: message.MaxPropertiesLen, MaxProperties: MaxProperties,
		MaxQueueID: MaxQueueID, MaxQueues: MaxQueues, MaxBatchMessages: MaxBatchMessages, MaxBody: 4 << 20,
		MaxPullMessages: MaxPullMessages, MaxPullBytes: wire.MaxPullBytes, MaxWaitMs: MaxWaitMs,
		MaxKeyLen: MaxKeyLen, MaxIDLen: MaxIDLen}
}

// TestValidationCatalogue sends every RPC the shared bad-input catalogue
// (also run against a live cluster by e2e/) and checks the code and that the
// backend (including its store) was never touched.
func TestValidationCatalogue(t *testing.T) {
	b := &recBackend{status: wire.ClusterStatus{ID: "n1", LeaderID: "n1"}}
	_, c, _ := startServer(t, b)
	ctx := testCtx(t)
	for _, tc := range badinput.Cases(Limits()) {
		t.Run(tc.Name, func(t *testing.T) {
			err := tc.Call(ctx, c)
			if got := status.Code(err); got != tc.Code {
				t.Fatalf("code %v (%v), want %v", got, err, tc.Code)
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
	for _, ok := range []string{"T", "my-topic_1", "%RETRY%g", "a|b", strings.Repeat("x", message.MaxTopicLen)} {
		if err := ValidTopic(ok); err != nil {
			t.Errorf("ValidTopic(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", " ", "a.b", "ä", "a\x00", strings.Repeat("x", message.MaxTopicLen+1)} {
		if ValidTopic(bad) == nil {
			t.Errorf("ValidTopic(%q) = nil", bad)
		}
	}
}
