package message

import (
	"fmt"
	"net/netip"
	"strconv"
)

// HostPort is an IPv4 address and port as RocketMQ stores BORNHOST and
// STOREHOST in message layout v1 (4-byte IP, 4-byte big-endian port).
type HostPort struct {
	IP   [4]byte
	Port int32
}

// Message is what a producer hands the store: everything in the record that
// does not come from the store itself (queue offset, physical offset, store
// timestamp, store host, body CRC).
type Message struct {
	Topic            string
	QueueID          int32
	Flag             int32
	SysFlag          int32
	BornTimestamp    int64
	BornHost         HostPort
	ReconsumeTimes   int32
	PreparedTxOffset int64
	Body             []byte
	// Properties in RocketMQ's encoding: key 0x01 value 0x02, repeated.
	Properties []byte
}

// String renders h as "a.b.c.d:port".
func (h HostPort) String() string {
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
func ParseHostPort(s string) (HostPort, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil || !ap.Addr().Unmap().Is4() {
		return HostPort{}, fmt.Errorf("message: %q is not an IPv4 host:port", s)
	}
	return HostPort{IP: ap.Addr().Unmap().As4(), Port: int32(ap.Port())}, nil
}
