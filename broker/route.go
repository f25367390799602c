package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/store"
)

// route answers GET_ROUTEINFO_BY_TOPIC: the topic's queues, all readable
// and writable, on the one broker name whose brokerId 0 is the leader.
func (b *Broker) route(ctx context.Context, req *remoting.Command) *remoting.Command {
	topic := req.Field("topic")
	queues, ok := b.topicQueues(topic)
	if !ok && req.Field(relayedField) == "" && !b.backend.IsLeader() {
		// This member may not have applied a topic the leader has just
		// created (a client that sent to it asks any name server next):
		// the leader's answer is the committed one.
		if resp := b.relay(ctx, req); resp.Code == remoting.CodeSuccess || resp.Code == remoting.CodeTopicNotExist {
			return resp
		}
	}
	if !ok {
		return req.Response(remoting.CodeTopicNotExist, "no route info for topic "+strconv.Quote(topic)+": it does not exist")
	}
	brokers, err := b.backend.Brokers(ctx)
	if err == nil && brokers.Leader == "" {
		err = fmt.Errorf("no leader broker address is known")
	}
	if err != nil {
		return req.Response(remoting.CodeSystemError, "route of "+strconv.Quote(topic)+": "+err.Error())
	}
	body, err := json.Marshal(b.routeData(queues, brokers))
	if err != nil {
		return req.Response(remoting.CodeSystemError, err.Error())
	}
	resp := req.Response(remoting.CodeSuccess, "")
	resp.Body = body
	return resp
}

// routeData is the one broker name of the cluster holding queues queues.
func (b *Broker) routeData(queues int32, brokers Brokers) remoting.TopicRouteData {
	addrs := map[int64]string{0: brokers.Leader}
	for i, f := range brokers.Followers {
		addrs[int64(i+1)] = f
	}
	return remoting.TopicRouteData{
		QueueDatas: []remoting.QueueData{{BrokerName: b.o.BrokerName, ReadQueueNums: queues, WriteQueueNums: queues,
			Perm: remoting.PermRead | remoting.PermWrite}},
		BrokerDatas: []remoting.BrokerData{{Cluster: b.o.ClusterName, BrokerName: b.o.BrokerName, BrokerAddrs: addrs}},
	}
}

// topicQueues is the queue count of a topic the store holds, or of the
// default topic while topics are created on first use.
func (b *Broker) topicQueues(topic string) (int32, bool) {
	if t, ok := b.backend.Reader().Topic(topic); ok {
		return t.Queues, true
	}
	if topic == b.o.DefaultTopic && b.o.AutoCreateTopics && b.o.DefaultQueues > 0 {
		return b.o.DefaultQueues, true
	}
	if strings.HasPrefix(topic, retryPrefix) {
		// A group's retry topic is routed before its first heartbeat
		// creates it: consumers look its route up before they beat.
		return 1, true
	}
	return 0, false
}

// queueOffset answers GET_MAX_OFFSET, GET_MIN_OFFSET and
// SEARCH_OFFSET_BY_TIMESTAMP with ext offset. A topic or queue the store
// does not hold answers 0, as RocketMQ's broker does.
func (b *Broker) queueOffset(req *remoting.Command) *remoting.Command {
	topic := req.Field("topic")
	queue, err := strconv.ParseInt(req.Field("queueId"), 10, 32)
	if err != nil {
		return req.Response(remoting.CodeSystemError, fmt.Sprintf("queueId %q: %v", req.Field("queueId"), err))
	}
	r := b.backend.Reader()
	var off int64
	switch req.Code {
	case remoting.CodeGetMaxOffset:
		off, err = r.MaxOffset(topic, int32(queue))
	case remoting.CodeGetMinOffset:
		off, err = r.MinOffset(topic, int32(queue))
	default:
		ts, perr := strconv.ParseInt(req.Field("timestamp"), 10, 64)
		if perr != nil {
			return req.Response(remoting.CodeSystemError, fmt.Sprintf("timestamp %q: %v", req.Field("timestamp"), perr))
		}
		off, err = r.OffsetByTime(topic, int32(queue), ts, false)
	}
	switch store.KindOf(err) {
	case store.KindNotFound, store.KindBadInput:
		off, err = 0, nil
	}
	if err != nil {
		return req.Response(remoting.CodeSystemError, err.Error())
	}
	resp := req.Response(remoting.CodeSuccess, "")
	resp.ExtFields["offset"] = strconv.FormatInt(off, 10)
	return resp
}
