package commitlog

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
