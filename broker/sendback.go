package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/raftmq/raftmq/auth"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/store"
)

// dlqPrefix names a group's dead-letter topic.
const dlqPrefix = "%DLQ%"

// Message properties of redelivery (MessageConst in apache/rocketmq).
const (
	propRetryTopic    = "RETRY_TOPIC"
	propOriginMsgID   = "ORIGIN_MESSAGE_ID"
	propDelayLevel    = "DELAY"
	defaultMaxRetries = 16
)

// delayLevels are RocketMQ's default messageDelayLevel: level n (from 1)
// waits delayLevels[n-1].
var delayLevels = []time.Duration{time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 3 * time.Minute, 4 * time.Minute, 5 * time.Minute, 6 * time.Minute,
	7 * time.Minute, 8 * time.Minute, 9 * time.Minute, 10 * time.Minute, 20 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour}

// delayOf is the wait of a DELAY property value (0: none or not a level).
func delayOf(level []byte) time.Duration {
	n, err := strconv.Atoi(string(level))
	if err != nil || n < 1 {
		return 0
	}
	return delayLevels[min(n, len(delayLevels))-1]
}

// setProperties returns props with each key of set given its value
// (replaced where present, appended in key order otherwise), without the
// store's own delivery mark and the other delay properties (the new DELAY
// level decides).
func setProperties(props []byte, set map[string]string) []byte {
	var out []byte
	for k, v := range message.Properties(props) {
		switch string(k) {
		case message.PropertyTimerDelivered, message.PropertyTimerDeliverMs, message.PropertyTimerDelaySec, message.PropertyTimerDelayMs:
			continue
		}
		if _, replaced := set[string(k)]; !replaced {
			out = message.AppendProperty(out, string(k), string(v))
		}
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		out = message.AppendProperty(out, k, set[k])
	}
	return out
}

// sendBack answers CONSUMER_SEND_MSG_BACK: the message a consumer could not
// handle (read again at its commitlog offset) is stored anew in the
// group's retry topic with its reconsume times raised and a delay level
// (the request's, else 3 + reconsume times, as RocketMQ does), which pulls
// of the retry topic honour; past maxReconsumeTimes (default 16), or with
// a negative delay level, it goes to the group's dead-letter topic. A
// member that is not the leader relays the request.
func (b *Broker) sendBack(ctx context.Context, req *remoting.Command, p *auth.Principal) *remoting.Command {
	group := req.Field("group")
	var offset, level int64
	if err := parseInts(req, intField{"offset", 64, &offset}, intField{"delayLevel", 32, &level}); err != nil || group == "" {
		return req.Response(remoting.CodeSystemError, fmt.Sprintf("send back: group, offset and delayLevel are required (%v)", err))
	}
	maxTimes := int64(defaultMaxRetries)
	if req.Field("maxReconsumeTimes") != "" {
		n, err := parseInt(req, "maxReconsumeTimes", 32)
		if err != nil {
			return req.Response(remoting.CodeSystemError, "send back: "+err.Error())
		}
		maxTimes = n
	}
	orig, err := b.backend.Reader().LookupByOffset(offset)
	if err != nil {
		return req.Response(remoting.CodeSystemError, fmt.Sprintf("send back: no message at offset %d: %v", offset, err))
	}
	if b.o.Auth != nil {
		if err := checkSendBack(p, orig); err != nil {
			return b.refuse(nil, req, p.Name, fmt.Sprintf("%s refused: the message at offset %d: %v", codeName(req.Code), offset, err), err)
		}
	}
	m, err := redelivery(orig, group, req.Field("originMsgId"), req.Field("originTopic"), level, maxTimes)
	if err != nil {
		return req.Response(remoting.CodeSystemError, "send back: "+err.Error())
	}
	if _, ok := b.backend.Reader().Topic(m.Topic); !ok {
		if err := b.backend.CreateTopic(ctx, store.TopicConfig{Name: m.Topic, Queues: 1}); errors.Is(err, ErrNotLeader) {
			return b.relay(ctx, req)
		}
	}
	results, err := b.backend.Send(ctx, []message.Message{m})
	if errors.Is(err, ErrNotLeader) {
		return b.relay(ctx, req)
	}
	if err == nil {
		err = firstFailure(results)
	}
	if err != nil {
		return req.Response(sendErrorCode(err), "send back: "+err.Error())
	}
	if strings.HasPrefix(m.Topic, dlqPrefix) {
		b.stats.deadLettered.Add(1)
	} else {
		b.stats.retried.Add(1)
	}
	return req.Response(remoting.CodeSuccess, "")
}

// redelivery is the message stored for a send back of orig by group.
func redelivery(orig store.Message, group, originMsgID, originTopic string, level, maxTimes int64) (message.Message, error) {
	set := map[string]string{}
	if _, ok := orig.Property(propRetryTopic); !ok {
		if originTopic == "" {
			originTopic = orig.Topic
		}
		set[propRetryTopic] = originTopic
	}
	if _, ok := orig.Property(propOriginMsgID); !ok && originMsgID != "" {
		set[propOriginMsgID] = originMsgID
	}
	topic := retryPrefix + group
	if int64(orig.ReconsumeTimes) >= maxTimes || level < 0 {
		topic = dlqPrefix + group
		set[propDelayLevel] = "0"
	} else {
		if level == 0 {
			level = 3 + int64(orig.ReconsumeTimes)
		}
		set[propDelayLevel] = strconv.FormatInt(min(level, int64(len(delayLevels))), 10)
	}
	if err := message.ValidateTopic(topic); err != nil {
		return message.Message{}, fmt.Errorf("group %q: %w", group, err)
	}
	return message.Message{Topic: topic, QueueID: 0, Flag: orig.Flag, SysFlag: orig.SysFlag, BornTimestamp: orig.BornTimestamp,
		BornHost: orig.BornHost, ReconsumeTimes: orig.ReconsumeTimes + 1, Body: orig.Body,
		Properties: setProperties(orig.Properties, set)}, nil
}

// due reports whether a record of topic may be delivered at now: records
// of a retry topic wait out their DELAY level from when they were stored.
// It also returns when a record not due will be. The store now holds a
// message with a DELAY level in its schedule topic until it is due (the
// copy in the retry topic carries TIMER_DELIVERED): only records a store
// wrote before that wait here.
func due(topic string, r *message.Record, now time.Time) (bool, time.Time) {
	if !strings.HasPrefix(topic, retryPrefix) {
		return true, time.Time{}
	}
	if _, delivered := message.GetProperty(r.Properties, message.PropertyTimerDelivered); delivered {
		return true, time.Time{}
	}
	level, ok := message.GetProperty(r.Properties, propDelayLevel)
	if !ok {
		return true, time.Time{}
	}
	at := time.UnixMilli(r.StoreTimestamp).Add(delayOf(level))
	return !now.Before(at), at
}
