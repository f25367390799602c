package transport

import (
	"fmt"
	"sync"

	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the codec pullCodec delegates to
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
)

// pullCodec is gRPC's proto codec, except that a PullResponse's records are
// not copied into the marshalled message: they are handed to gRPC as their
// own buffer after the other fields, and come back to recordBufs once the
// response is written. Protobuf allows a bytes field anywhere in the
// encoding, and records is the last field, so the bytes are exactly what
// proto.Marshal would produce.
type pullCodec struct{ base encoding.CodecV2 }

func newPullCodec() pullCodec { return pullCodec{base: encoding.GetCodecV2("proto")} }

func (c pullCodec) Name() string { return "proto" }

func (c pullCodec) Unmarshal(data mem.BufferSlice, v any) error { return c.base.Unmarshal(data, v) }

func (c pullCodec) Marshal(v any) (mem.BufferSlice, error) {
	r, ok := v.(*pb.PullResponse)
	if !ok || mem.IsBelowBufferPoolingThreshold(len(r.Records)) {
		return c.base.Marshal(v)
	}
	records := r.Records
	r.Records = nil
	head, err := proto.Marshal(r)
	r.Records = records
	if err != nil {
		return nil, fmt.Errorf("transport: marshal pull response: %w", err)
	}
	head = protowire.AppendTag(head, 6, protowire.BytesType)
	head = protowire.AppendVarint(head, uint64(len(records)))
	return mem.BufferSlice{mem.SliceBuffer(head), mem.NewBuffer(&records, recordBufs)}, nil
}

// maxPooledRecords bounds the record buffers kept for reuse (a default pull
// answer is at most about 4 MiB).
const maxPooledRecords = 8 << 20

// recordBufs recycles the record buffers of pull answers (it is the
// mem.BufferPool pullCodec hands them to gRPC with), so a catch-up does not
// allocate and clear a fresh buffer per pull.
var recordBufs = &recordPool{}

type recordPool struct{ p sync.Pool }

// Get returns a buffer of length n (contents undefined).
func (p *recordPool) Get(n int) *[]byte {
	if b, ok := p.p.Get().(*[]byte); ok && cap(*b) >= n {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n)
	return &b
}

// Put keeps b for reuse unless it is too large.
func (p *recordPool) Put(b *[]byte) {
	if cap(*b) <= maxPooledRecords {
		p.p.Put(b)
	}
}
