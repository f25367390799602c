package transport

import (
	"bytes"
	"strings"

	"github.com/raftmq/raftmq/message"
	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
	"github.com/raftmq/raftmq/wire"
)

// Request limits. Every request is checked against them before the backend
// is touched, so bad input changes nothing. A topic and the encoded
// properties are bounded by the message layout's limits, message.MaxTopicLen
// and message.MaxPropertiesLen.
const (
	MaxGroupLen         = 255
	MaxProperties       = 128
	MaxQueueID          = 1023 // store.Config.MaxQueues - 1 by default
	MaxQueues           = 1024
	MaxPullMessages     = 1024
	DefaultPullMessages = 32
	DefaultPullBytes    = 4 << 20
	// MaxQueryBytes bounds the message bytes of one query answer (at least
	// one message is returned): 1,024 messages of 4 MiB would not fit a
	// gRPC message.
	MaxQueryBytes    = 32 << 20
	MaxWaitMs        = 60_000
	MaxQueryMessages = 1024
	DefaultQueryMax  = 64
	MaxBatchMessages = 4096
	MaxKeyLen        = 1024
	MaxIDLen         = 255
)

// ValidTopic reports why name is not a legal topic, as InvalidArgument, or
// nil: message.ValidateTopic, RocketMQ's rule.
func ValidTopic(name string) error {
	if err := message.ValidateTopic(name); err != nil {
		return invalid("%s", strings.TrimPrefix(err.Error(), message.ErrBadTopic.Error()+": "))
	}
	return nil
}

func validQueue(q int32) error {
	if q < 0 || q > MaxQueueID {
		return invalid("queue id %d out of range [0, %d]", q, MaxQueueID)
	}
	return nil
}

func validOffset(what string, off int64) error {
	if off < 0 {
		return invalid("%s %d is negative", what, off)
	}
	return nil
}

func validName(what, s string, limit int) error {
	if s == "" {
		return invalid("%s is empty", what)
	}
	if len(s) > limit {
		return invalid("%s is %d bytes; the limit is %d", what, len(s), limit)
	}
	return nil
}

func validateMessage(i int, m *pb.Message, maxBody int) error {
	if err := ValidTopic(m.GetTopic()); err != nil {
		return invalid("message %d: %s", i, msgOf(err))
	}
	if q := m.GetQueueId(); q != -1 {
		if err := validQueue(q); err != nil {
			return invalid("message %d: %s", i, msgOf(err))
		}
	}
	if len(m.GetBody()) > maxBody {
		return invalid("message %d: body is %d bytes; the limit is %d", i, len(m.GetBody()), maxBody)
	}
	if m.GetBornTimestamp() < 0 {
		return invalid("message %d: born timestamp %d is negative", i, m.GetBornTimestamp())
	}
	if h := m.GetBornHost(); h != "" {
		if _, err := message.ParseHostPort(h); err != nil {
			return invalid("message %d: born host: %v", i, err)
		}
	}
	return validateProperties(i, m.GetProperties())
}

func validateProperties(i int, props []*pb.Property) error {
	if len(props) > MaxProperties {
		return invalid("message %d: %d properties; the limit is %d", i, len(props), MaxProperties)
	}
	n := 0
	for _, p := range props {
		if p.GetKey() == "" {
			return invalid("message %d: property with an empty key", i)
		}
		if bad(p.GetKey()) || bad(p.GetValue()) {
			return invalid("message %d: property %q contains a 0x01 or 0x02 byte", i, p.GetKey())
		}
		n += len(p.GetKey()) + len(p.GetValue()) + 2
	}
	if n > message.MaxPropertiesLen {
		return invalid("message %d: properties are %d bytes encoded; the limit is %d", i, n, message.MaxPropertiesLen)
	}
	return nil
}

func bad(s string) bool { return bytes.ContainsAny([]byte(s), "\x01\x02") }

func validateSend(req *pb.SendRequest, maxBody int) error {
	msgs := req.GetMessages()
	if len(msgs) == 0 {
		return invalid("send: no messages")
	}
	if len(msgs) > MaxBatchMessages {
		return invalid("send: %d messages in one batch; the limit is %d", len(msgs), MaxBatchMessages)
	}
	for i, m := range msgs {
		if err := validateMessage(i, m, maxBody); err != nil {
			return err
		}
	}
	return nil
}

func validatePull(req *pb.PullRequest) error {
	if err := ValidTopic(req.GetTopic()); err != nil {
		return err
	}
	if err := validQueue(req.GetQueueId()); err != nil {
		return err
	}
	if err := validOffset("offset", req.GetOffset()); err != nil {
		return err
	}
	if n := req.GetMaxMessages(); n < 0 || n > MaxPullMessages {
		return invalid("max messages %d out of range [0, %d]", n, MaxPullMessages)
	}
	if n := req.GetMaxBytes(); n < 0 || n > wire.MaxPullBytes {
		return invalid("max bytes %d out of range [0, %d]", n, wire.MaxPullBytes)
	}
	if w := req.GetMaxWaitMs(); w < 0 || w > MaxWaitMs {
		return invalid("max wait %d ms out of range [0, %d]", w, MaxWaitMs)
	}
	if len(req.GetTag()) > MaxKeyLen {
		return invalid("tag is %d bytes; the limit is %d", len(req.GetTag()), MaxKeyLen)
	}
	return nil
}

func validateCommits(req *pb.CommitOffsetRequest) error {
	cs := req.GetCommits()
	if len(cs) == 0 {
		return invalid("commit offset: no offsets")
	}
	if len(cs) > MaxBatchMessages {
		return invalid("commit offset: %d offsets; the limit is %d", len(cs), MaxBatchMessages)
	}
	for i, c := range cs {
		if err := validGroupQueue(c.GetGroup(), c.GetTopic(), c.GetQueueId()); err != nil {
			return invalid("commit %d: %s", i, msgOf(err))
		}
		if err := validOffset("offset", c.GetOffset()); err != nil {
			return invalid("commit %d: %s", i, msgOf(err))
		}
	}
	return nil
}

func validGroupQueue(group, topic string, q int32) error {
	if err := validName("group", group, MaxGroupLen); err != nil {
		return err
	}
	if err := ValidTopic(topic); err != nil {
		return err
	}
	return validQueue(q)
}

func validTopicQueue(topic string, q int32) error {
	if err := ValidTopic(topic); err != nil {
		return err
	}
	return validQueue(q)
}

func validateQueryByKey(req *pb.QueryByKeyRequest) error {
	if err := ValidTopic(req.GetTopic()); err != nil {
		return err
	}
	if err := validName("key", req.GetKey(), MaxKeyLen); err != nil {
		return err
	}
	if n := req.GetMaxMessages(); n < 0 || n > MaxQueryMessages {
		return invalid("max messages %d out of range [0, %d]", n, MaxQueryMessages)
	}
	b, e := req.GetBeginTimestamp(), req.GetEndTimestamp()
	if b < 0 || e < 0 || (e != 0 && b > e) {
		return invalid("time range [%d, %d] is invalid", b, e)
	}
	return nil
}

func validateCreateTopic(req *pb.CreateTopicRequest) error {
	if err := ValidTopic(req.GetName()); err != nil {
		return err
	}
	if q := req.GetQueues(); q < 0 || q > MaxQueues {
		return invalid("queues %d out of range [1, %d] (0 = server default)", q, MaxQueues)
	}
	if p := req.GetPerm(); p < 0 || p > 7 {
		return invalid("perm %d out of range [0, 7]", p)
	}
	return nil
}

func validateJoin(req *pb.JoinRequest) error {
	if err := validName("id", req.GetId(), MaxIDLen); err != nil {
		return err
	}
	if err := validAddr("raft address", req.GetRaftAddr()); err != nil {
		return err
	}
	return validAddr("api address", req.GetApiAddr())
}

func validAddr(what, a string) error {
	if err := validName(what, a, MaxIDLen); err != nil {
		return err
	}
	i := bytes.LastIndexByte([]byte(a), ':')
	if i <= 0 || i == len(a)-1 {
		return invalid("%s %q is not host:port", what, a)
	}
	return nil
}
