package client

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the codec pullCodec delegates to
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
)

// pullCodec is gRPC's proto codec, except that a PullResponse is decoded
// with its records aliasing the received bytes (gathered once) instead of
// being copied out of them by proto.Unmarshal. An answer with any field but
// the offsets, status and records (such as the per-message form) is decoded
// by proto.Unmarshal.
type pullCodec struct{ base encoding.CodecV2 }

func newPullCodec() pullCodec { return pullCodec{base: encoding.GetCodecV2("proto")} }

func (c pullCodec) Name() string { return "proto" }

func (c pullCodec) Marshal(v any) (mem.BufferSlice, error) { return c.base.Marshal(v) }

func (c pullCodec) Unmarshal(data mem.BufferSlice, v any) error {
	r, ok := v.(*pb.PullResponse)
	if !ok || mem.IsBelowBufferPoolingThreshold(data.Len()) {
		return c.base.Unmarshal(data, v)
	}
	b := data.Materialize()
	if decodePullResponse(b, r) {
		return nil
	}
	proto.Reset(r)
	if err := proto.Unmarshal(b, r); err != nil {
		return fmt.Errorf("client: unmarshal pull response: %w", err)
	}
	return nil
}

// decodePullResponse decodes b into r if it holds only the fields it knows
// (status, offsets, records), aliasing records into b.
func decodePullResponse(b []byte, r *pb.PullResponse) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		switch {
		case typ == protowire.VarintType && num >= 1 && num <= 4:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return false
			}
			b = b[n:]
			switch num {
			case 1:
				r.Status = pb.PullStatus(int32(v))
			case 2:
				r.NextOffset = int64(v)
			case 3:
				r.MinOffset = int64(v)
			case 4:
				r.MaxOffset = int64(v)
			}
		case typ == protowire.BytesType && num == 6:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return false
			}
			b = b[n:]
			r.Records = v[:len(v):len(v)]
		default:
			return false
		}
	}
	return true
}
