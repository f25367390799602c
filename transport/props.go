package transport

import (
	"github.com/raftmq/raftmq/message"
	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
)

// EncodeProperties renders properties in RocketMQ's encoding (key 0x01 value
// 0x02, repeated), in the given order.
func EncodeProperties(props []*pb.Property) []byte { return appendProperties(nil, props) }

// appendProperties is EncodeProperties appending to dst. The request
// validation checked every key and value.
func appendProperties(dst []byte, props []*pb.Property) []byte {
	for _, p := range props {
		dst = message.AppendProperty(dst, p.GetKey(), p.GetValue())
	}
	return dst
}

// DecodeProperties parses RocketMQ's property encoding (message.Properties:
// malformed pairs are skipped; it never panics).
func DecodeProperties(b []byte) []*pb.Property {
	var out []*pb.Property
	for k, v := range message.Properties(b) {
		out = append(out, &pb.Property{Key: string(k), Value: string(v)})
	}
	return out
}

// PropertyValue returns the value of key, or "".
func PropertyValue(props []*pb.Property, key string) string {
	for _, p := range props {
		if p.GetKey() == key {
			return p.GetValue()
		}
	}
	return ""
}
