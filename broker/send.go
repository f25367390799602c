package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/store"
)

// relayedField marks a request one member relayed to the leader: a member
// that is not the leader either refuses it instead of relaying it again.
const relayedField = "raftmqRelayed"

// send stores a SEND_MESSAGE, SEND_MESSAGE_V2 or SEND_BATCH_MESSAGE, or
// relays it to the leader.
func (b *Broker) send(ctx context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	h, err := remoting.ParseSendHeader(req)
	if err != nil {
		return req.Response(remoting.CodeMessageIllegal, err.Error())
	}
	msgs, err := sendMessages(req, h, bornHost(conn.RemoteAddr()))
	if err != nil {
		return req.Response(remoting.CodeMessageIllegal, err.Error())
	}
	results, err := b.backend.Send(ctx, msgs)
	if errors.Is(err, ErrNotLeader) {
		return b.relay(ctx, req)
	}
	if err == nil {
		err = firstFailure(results)
	}
	if err != nil {
		b.o.Logger.Debug("send failed", "topic", h.Topic, "queue", h.QueueID, "messages", len(msgs), "error", err)
		return req.Response(sendErrorCode(err), err.Error())
	}
	b.stats.sends.Add(1)
	return sendAnswer(req, results, h.QueueID)
}

// sendMessages builds the messages of a send: one from the header and
// body, or one per message of a batch body, each with the header's topic,
// queue, system flag, born timestamp and reconsume times.
func sendMessages(req *remoting.Command, h remoting.SendHeader, born message.HostPort) ([]message.Message, error) {
	base := message.Message{Topic: h.Topic, QueueID: h.QueueID, Flag: h.Flag, SysFlag: h.SysFlag,
		BornTimestamp: h.BornTimestamp, BornHost: born, ReconsumeTimes: h.ReconsumeTimes}
	if req.Code != remoting.CodeSendBatchMessage {
		m := base
		m.Body, m.Properties = req.Body, []byte(h.Properties)
		return []message.Message{m}, nil
	}
	batch, err := remoting.DecodeBatch(req.Body)
	if err != nil {
		return nil, err
	}
	msgs := make([]message.Message, len(batch))
	for i, bm := range batch {
		msgs[i] = base
		msgs[i].Flag, msgs[i].Body, msgs[i].Properties = bm.Flag, bm.Body, bm.Properties
	}
	return msgs, nil
}

// firstFailure is the first per-message refusal of a send (the node
// validates every message before proposing, so one is rare: a topic
// deleted meanwhile).
func firstFailure(results []store.PutResult) error {
	for i, r := range results {
		if r.Err != nil {
			return fmt.Errorf("message %d of %d: %w", i, len(results), r.Err)
		}
	}
	if len(results) == 0 {
		return errors.New("broker: the send stored no message")
	}
	return nil
}

// sendAnswer is SUCCESS with the fields RocketMQ's clients read: msgId (the
// offset message ids, comma-separated for a batch), queueId and
// queueOffset of the first message. A delayed message (stored in the
// schedule topic until due) is answered with the queue the request named,
// as RocketMQ's broker does: clients take queueId for a queue of the
// request's topic.
func sendAnswer(req *remoting.Command, results []store.PutResult, reqQueue int32) *remoting.Command {
	ids := make([]string, len(results))
	for i, r := range results {
		ids[i] = r.OffsetMsgID
	}
	resp := req.Response(remoting.CodeSuccess, "")
	resp.ExtFields["msgId"] = strings.Join(ids, ",")
	queue := results[0].QueueID
	if results[0].Topic == store.ScheduleTopic {
		queue = reqQueue
	}
	resp.ExtFields["queueId"] = strconv.FormatInt(int64(queue), 10)
	resp.ExtFields["queueOffset"] = strconv.FormatInt(results[0].QueueOffset, 10)
	return resp
}

// sendErrorCode maps a failed send to the RocketMQ code its clients act on:
// the store's refusals of the request, SYSTEM_BUSY before anything was
// proposed, SYSTEM_ERROR otherwise (the outcome may be unknown; the client
// retries).
func sendErrorCode(err error) int16 {
	switch {
	case errors.Is(err, store.ErrNoSuchTopic):
		return remoting.CodeTopicNotExist
	case store.KindOf(err) == store.KindBadInput:
		return remoting.CodeMessageIllegal
	case errors.Is(err, ErrBusy), store.KindOf(err) == store.KindLimit:
		return remoting.CodeSystemBusy
	}
	return remoting.CodeSystemError
}

// relay sends req to the leader's broker address and returns its answer.
// A request relayed once is not relayed again (leadership moved meanwhile):
// SERVICE_NOT_AVAILABLE, which the client retries.
func (b *Broker) relay(ctx context.Context, req *remoting.Command) *remoting.Command {
	if req.Field(relayedField) != "" {
		return req.Response(remoting.CodeServiceNotAvailable, "not the leader: leadership moved while the request was relayed; retry")
	}
	brokers, err := b.backend.Brokers(ctx)
	if err != nil || brokers.Leader == "" {
		return req.Response(remoting.CodeServiceNotAvailable, fmt.Sprintf("not the leader, and no leader broker address is known (%v); retry", err))
	}
	c, err := b.relays.get(ctx, brokers.Leader)
	if err != nil {
		return req.Response(remoting.CodeServiceNotAvailable, fmt.Sprintf("not the leader; the leader at %s is unreachable: %v", brokers.Leader, err))
	}
	fwd := *req
	fwd.ExtFields = maps.Clone(req.ExtFields)
	if fwd.ExtFields == nil {
		fwd.ExtFields = map[string]string{}
	}
	fwd.ExtFields[relayedField] = "1"
	// The leader cannot check the client's signature over fields that now
	// include relayedField: this member authorized the client, and vouches
	// for the request with the node token.
	delete(fwd.ExtFields, nodeTokenField)
	if b.o.Auth != nil {
		if token := b.o.Auth.NodeToken(); token != "" {
			fwd.ExtFields[nodeTokenField] = token
		}
	}
	fwd.Flag &^= remoting.FlagOneway
	rctx, cancel := context.WithTimeout(ctx, b.o.RelayTimeout)
	defer cancel()
	resp, err := c.Invoke(rctx, &fwd)
	if err != nil {
		b.relays.drop(brokers.Leader, c)
		// The leader may have stored it: an unknown outcome, which the
		// client retries as it does every SYSTEM_ERROR.
		return req.Response(remoting.CodeSystemError, fmt.Sprintf("relay to the leader at %s failed, outcome unknown: %v", brokers.Leader, err))
	}
	b.stats.relayed.Add(1)
	return resp
}
