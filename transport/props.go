package transport

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strconv"

	"github.com/raftmq/raftmq/commitlog"
	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
)

// Property keys RocketMQ's store and clients use.
const (
	PropUniqKey = "UNIQ_KEY"
	PropKeys    = "KEYS"
	PropTags    = "TAGS"
)

const (
	nameValueSep = 0x01
	propertySep  = 0x02
)

// EncodeProperties renders properties in RocketMQ's encoding (key 0x01 value
// 0x02, repeated), in the given order.
func EncodeProperties(props []*pb.Property) []byte { return appendProperties(nil, props) }

// DecodeProperties parses RocketMQ's property encoding. Malformed pairs
// (no separator) are skipped; it never panics.
func DecodeProperties(b []byte) []*pb.Property {
	var out []*pb.Property
	for len(b) > 0 {
		pair := b
		if i := bytes.IndexByte(b, propertySep); i >= 0 {
			pair, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		k, v, ok := bytes.Cut(pair, []byte{nameValueSep})
		if !ok || len(k) == 0 {
			continue
		}
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

// FormatHostPort renders h as "a.b.c.d:port".
func FormatHostPort(h commitlog.HostPort) string {
	var buf [len("255.255.255.255:-2147483648")]byte
	b := buf[:0]
	for i, octet := range h.IP {
		if i > 0 {
			b = append(b, '.')
		}
		b = strconv.AppendUint(b, uint64(octet), 10)
	}
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(h.Port), 10)
	return string(b)
}

// ParseHostPort parses "a.b.c.d:port" (IPv4 only, as message layout v1).
func ParseHostPort(s string) (commitlog.HostPort, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil || !ap.Addr().Unmap().Is4() {
		return commitlog.HostPort{}, fmt.Errorf("transport: %q is not an IPv4 host:port", s)
	}
	return commitlog.HostPort{IP: ap.Addr().Unmap().As4(), Port: int32(ap.Port())}, nil
}

// OffsetMsgID is RocketMQ's offset message id: upper-case hex of store IP (4),
// port (4, big endian) and physical offset (8).
func OffsetMsgID(storeHost commitlog.HostPort, phy int64) string {
	return commitlog.OffsetMsgID(storeHost, phy)
}

// ParseOffsetMsgID decodes an offset message id; ok is false if id is not one.
func ParseOffsetMsgID(id string) (host commitlog.HostPort, phy int64, ok bool) {
	if len(id) != 32 {
		return host, 0, false
	}
	b, err := hex.DecodeString(id)
	if err != nil {
		return host, 0, false
	}
	copy(host.IP[:], b[:4])
	host.Port = int32(binary.BigEndian.Uint32(b[4:8]))
	return host, int64(binary.BigEndian.Uint64(b[8:])), true
}
