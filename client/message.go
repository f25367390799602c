package client

import (
	"crypto/rand"
	"encoding/binary"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/raftmq/raftmq/message"
	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
)

// Message is a message to send. Build one with NewMessage and the With
// methods; the client fills ID (UNIQ_KEY) if it is empty.
type Message struct {
	Topic      string
	QueueID    int32 // -1: the server picks (round robin)
	ID         string
	Keys       []string
	Tag        string
	Properties map[string]string
	Body       []byte
	BornTime   time.Time // zero: the server's clock
}

// NewMessage returns a message for topic with any queue.
func NewMessage(topic string, body []byte) Message {
	return Message{Topic: topic, QueueID: -1, Body: body}
}

// WithKeys sets the KEYS property (indexed, space-separated).
func (m Message) WithKeys(keys ...string) Message { m.Keys = keys; return m }

// WithTag sets the TAGS property.
func (m Message) WithTag(tag string) Message { m.Tag = tag; return m }

// WithQueue pins the message to a queue.
func (m Message) WithQueue(q int32) Message { m.QueueID = q; return m }

// WithID sets the message id (UNIQ_KEY).
func (m Message) WithID(id string) Message { m.ID = id; return m }

// WithDelay asks the cluster to deliver m d after it stores it (the
// TIMER_DELAY_MS property; whole milliseconds, at most 40 days). Until then
// m waits in the schedule topic and consumers of its topic do not see it;
// then a copy is stored in its topic, once.
func (m Message) WithDelay(d time.Duration) Message {
	return m.WithProperty(message.PropertyTimerDelayMs, strconv.FormatInt(d.Milliseconds(), 10))
}

// WithDeliverAt asks the cluster to deliver m at t (the TIMER_DELIVER_MS
// property, by the leader's clock; at most 40 days ahead). A time already
// past delivers at once.
func (m Message) WithDeliverAt(t time.Time) Message {
	return m.WithProperty(message.PropertyTimerDeliverMs, strconv.FormatInt(t.UnixMilli(), 10))
}

// WithProperty sets a user property.
func (m Message) WithProperty(k, v string) Message {
	p := make(map[string]string, len(m.Properties)+1)
	for a, b := range m.Properties {
		p[a] = b
	}
	p[k] = v
	m.Properties = p
	return m
}

// toProto renders m with properties in a fixed order: UNIQ_KEY, KEYS,
// TAGS, then user properties by key.
func (m Message) toProto() *pb.Message {
	var props []*pb.Property
	if m.ID != "" {
		props = append(props, &pb.Property{Key: message.PropertyUniqKey, Value: m.ID})
	}
	if len(m.Keys) > 0 {
		props = append(props, &pb.Property{Key: message.PropertyKeys, Value: strings.Join(m.Keys, " ")})
	}
	if m.Tag != "" {
		props = append(props, &pb.Property{Key: message.PropertyTags, Value: m.Tag})
	}
	keys := make([]string, 0, len(m.Properties))
	for k := range m.Properties {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		props = append(props, &pb.Property{Key: k, Value: m.Properties[k]})
	}
	out := &pb.Message{Topic: m.Topic, QueueId: m.QueueID, Body: m.Body, Properties: props}
	if !m.BornTime.IsZero() {
		out.BornTimestamp = m.BornTime.UnixMilli()
	}
	return out
}

// IDGenerator makes RocketMQ-like unique message ids: 32 upper-case hex
// characters, a random 6-byte prefix and the process id fixed per
// generator, then a 64-bit counter seeded from the clock. Ids from one
// generator never repeat; generators differ by their random prefix.
type IDGenerator struct {
	prefix [8]byte
	seq    atomic.Uint64
}

// NewIDGenerator returns a generator with a fresh random prefix.
func NewIDGenerator() *IDGenerator {
	g := &IDGenerator{}
	_, _ = rand.Read(g.prefix[:6])
	binary.BigEndian.PutUint16(g.prefix[6:], uint16(os.Getpid()))
	g.seq.Store(uint64(time.Now().UnixNano()))
	return g
}

// Next returns a new id.
func (g *IDGenerator) Next() string {
	var b [16]byte
	copy(b[:8], g.prefix[:])
	binary.BigEndian.PutUint64(b[8:], g.seq.Add(1))
	return upperHex(b)
}

// upperHex is strings.ToUpper(hex.EncodeToString(b[:])) in one allocation:
// a Send runs it once per message without an id.
func upperHex(b [16]byte) string {
	const digits = "0123456789ABCDEF"
	var out [32]byte
	for i, c := range b {
		out[2*i], out[2*i+1] = digits[c>>4], digits[c&0x0f]
	}
	return string(out[:])
}

// SendResult is the outcome of one sent message.
type SendResult struct {
	MsgID          string
	OffsetMsgID    string
	Topic          string
	QueueID        int32
	QueueOffset    int64
	PhysicalOffset int64
	StoreTimestamp int64
	Err            error // per-message failure (nothing stored for it)
}

// ReceivedMessage is a stored message as read back.
type ReceivedMessage struct {
	Topic          string
	QueueID        int32
	QueueOffset    int64
	PhysicalOffset int64
	MsgID          string
	OffsetMsgID    string
	StoreTimestamp int64
	BornTimestamp  int64
	BornHost       string
	StoreHost      string
	Flag           int32
	SysFlag        int32
	ReconsumeTimes int32
	BodyCRC        uint32
	Tags           string
	Keys           []string
	Properties     map[string]string
	Body           []byte
}

func fromStored(m *pb.StoredMessage) ReceivedMessage {
	props := make(map[string]string, len(m.GetProperties()))
	for _, p := range m.GetProperties() {
		props[p.GetKey()] = p.GetValue()
	}
	return ReceivedMessage{
		Topic: m.GetTopic(), QueueID: m.GetQueueId(), QueueOffset: m.GetQueueOffset(),
		PhysicalOffset: m.GetPhysicalOffset(), MsgID: m.GetMsgId(), OffsetMsgID: m.GetOffsetMsgId(),
		StoreTimestamp: m.GetStoreTimestamp(), BornTimestamp: m.GetBornTimestamp(),
		BornHost: m.GetBornHost(), StoreHost: m.GetStoreHost(), Flag: m.GetFlag(),
		SysFlag: m.GetSysFlag(), ReconsumeTimes: m.GetReconsumeTimes(), BodyCRC: m.GetBodyCrc(),
		Tags: props[message.PropertyTags], Keys: strings.Fields(props[message.PropertyKeys]),
		Properties: props, Body: m.GetBody(),
	}
}

func fromStoredList(ms []*pb.StoredMessage) []ReceivedMessage {
	out := make([]ReceivedMessage, len(ms))
	for i, m := range ms {
		out[i] = fromStored(m)
	}
	return out
}
