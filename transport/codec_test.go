package transport

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
)

// pullCodec produces exactly proto.Marshal's bytes, for answers with and
// without records, and for other messages.
func TestPullCodecMarshalEqualsProto(t *testing.T) {
	c := newPullCodec()
	big := bytes.Repeat([]byte("record"), 2000)
	for _, m := range []proto.Message{
		&pb.PullResponse{Status: pb.PullStatus_PULL_STATUS_FOUND, NextOffset: 1 << 40, MinOffset: 3, MaxOffset: 1<<40 + 9, Records: big},
		&pb.PullResponse{Status: pb.PullStatus_PULL_STATUS_FOUND, Records: []byte("small")},
		&pb.PullResponse{Status: pb.PullStatus_PULL_STATUS_OFFSET_OVERFLOW_ONE, NextOffset: 7},
		&pb.PullResponse{Messages: []*pb.StoredMessage{{Topic: "T", Body: big}}},
		&pb.SendRequest{Messages: []*pb.Message{{Topic: "T", Body: big}}},
	} {
		orig := proto.Clone(m)
		want, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		data, err := c.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if got := data.Materialize(); !bytes.Equal(got, want) {
			t.Fatalf("%T: codec wrote %d bytes, proto.Marshal %d (or they differ)", m, len(got), len(want))
		}
		if !proto.Equal(m, orig) {
			t.Fatalf("%T: marshal changed the message", m)
		}
	}
}
