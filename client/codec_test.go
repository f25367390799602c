package client

import (
	"bytes"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
)

// pullCodec decodes what proto.Unmarshal decodes: a records answer (its
// own decoder), a per-message answer and a message of another type (both
// through proto.Unmarshal), whatever the split of the received bytes.
func TestPullCodecUnmarshalEqualsProto(t *testing.T) {
	c := newPullCodec()
	big := bytes.Repeat([]byte("record"), 2000)
	for _, m := range []proto.Message{
		&pb.PullResponse{Status: pb.PullStatus_PULL_STATUS_FOUND, NextOffset: 1 << 40, MinOffset: 3, MaxOffset: 1<<40 + 9, Records: big},
		&pb.PullResponse{Status: pb.PullStatus_PULL_STATUS_FOUND, NextOffset: 2, Messages: []*pb.StoredMessage{{Topic: "T", Body: big}}},
		&pb.PullResponse{Status: pb.PullStatus_PULL_STATUS_NO_MATCHED_MESSAGE, NextOffset: 5},
		&pb.SendResponse{Results: []*pb.SendResult{{Topic: string(big)}}},
	} {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var data mem.BufferSlice
		for p := 0; p < len(b); p += 1000 { // frames
			data = append(data, mem.SliceBuffer(b[p:min(p+1000, len(b))]))
		}
		got := m.ProtoReflect().New().Interface()
		if err := c.Unmarshal(data, got); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(got, m) {
			t.Fatalf("%T: decoded %v", m, got)
		}
	}
	var r pb.PullResponse
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(append([]byte{0x32, 0xff, 0xff, 0x7f}, big...))}, &r); err == nil {
		t.Fatal("a records field longer than the answer was accepted")
	}
}
