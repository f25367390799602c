package broker

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/raftmq/raftmq/auth"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/store"
)

// nodeTokenField carries the node token on a request one member relays to
// the leader: the relay adds relayedField, which the client did not sign,
// so the leader admits a relayed request by this token instead of by the
// client's signature (the relaying member authorized the client).
const nodeTokenField = "RaftmqNodeToken"

// codeNames name the request codes the broker serves in refusals.
var codeNames = map[int16]string{
	remoting.CodeSendMessage: "SEND_MESSAGE", remoting.CodeSendMessageV2: "SEND_MESSAGE_V2",
	remoting.CodeSendBatchMessage: "SEND_BATCH_MESSAGE", remoting.CodePullMessage: "PULL_MESSAGE",
	remoting.CodeQueryConsumerOffset: "QUERY_CONSUMER_OFFSET", remoting.CodeUpdateConsumerOffset: "UPDATE_CONSUMER_OFFSET",
	remoting.CodeSearchOffsetByTime: "SEARCH_OFFSET_BY_TIMESTAMP", remoting.CodeGetMaxOffset: "GET_MAX_OFFSET",
	remoting.CodeGetMinOffset: "GET_MIN_OFFSET", remoting.CodeHeartbeat: "HEART_BEAT",
	remoting.CodeUnregisterClient: "UNREGISTER_CLIENT", remoting.CodeConsumerSendMsgBack: "CONSUMER_SEND_MSG_BACK",
	remoting.CodeGetConsumerListByGroup: "GET_CONSUMER_LIST_BY_GROUP", remoting.CodeGetRouteInfoByTopic: "GET_ROUTEINFO_BY_TOPIC",
}

func codeName(code int16) string {
	if n, ok := codeNames[code]; ok {
		return n
	}
	return fmt.Sprintf("request code %d", code)
}

// admit authenticates and authorizes req when the ACL is on. It returns
// the caller (nil without ACL) or the answer refusing the request.
func (b *Broker) admit(conn *remoting.Conn, req *remoting.Command) (*auth.Principal, *remoting.Command) {
	if b.o.Auth == nil {
		return nil, nil
	}
	p, err := b.authenticate(req)
	if err != nil {
		b.stats.unauthenticated.Add(1)
		reason := strings.TrimPrefix(err.Error(), auth.ErrUnauthenticated.Error()+": ")
		return nil, b.refuse(conn, req, "", fmt.Sprintf("%s refused: not authenticated: %s", codeName(req.Code),
			strings.TrimPrefix(reason, "auth: ")), err)
	}
	if err := authorize(p, req); err != nil {
		if !errors.Is(err, auth.ErrDenied) { // the header or body does not say what is asked for
			code := remoting.CodeSystemError
			if isSend(req.Code) {
				code = remoting.CodeMessageIllegal // as the send itself answers
			}
			return nil, req.Response(code, codeName(req.Code)+": "+err.Error())
		}
		return nil, b.refuse(conn, req, p.Name, fmt.Sprintf("%s refused: %v", codeName(req.Code), err), err)
	}
	return p, nil
}

// refuse answers NO_PERMISSION with remark and counts it.
func (b *Broker) refuse(conn *remoting.Conn, req *remoting.Command, principal, remark string, err error) *remoting.Command {
	b.stats.denied.Add(1)
	remote := ""
	if conn != nil {
		remote = conn.RemoteAddr().String()
	}
	b.o.Logger.Debug("request refused", "code", req.Code, "remote", remote, "principal", principal, "error", err)
	return req.Response(remoting.CodeNoPermission, remark)
}

// authenticate names the caller of req: a request relayed by another
// member by the node token (a relayed request without a valid one is
// refused), any other by its AccessKey and Signature.
func (b *Broker) authenticate(req *remoting.Command) (*auth.Principal, error) {
	if req.Field(relayedField) != "" {
		want, got := b.o.Auth.NodeToken(), req.Field(nodeTokenField)
		if want == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
			return nil, fmt.Errorf("%w: a relayed request without a valid node token", auth.ErrUnauthenticated)
		}
		return &auth.Principal{Name: "node", Node: true}, nil
	}
	return b.o.Auth.Signature(req.ExtFields, req.Body)
}

// authorize checks that p holds what req's code needs: an error wrapping
// auth.ErrDenied names what was refused; any other error means the
// request's header or body could not be read (nothing is served then).
func authorize(p *auth.Principal, req *remoting.Command) error {
	switch {
	case isSend(req.Code):
		h, err := remoting.ParseSendHeader(req)
		if err != nil {
			return err
		}
		return checkProduce(p, h.Topic)
	}
	switch req.Code {
	case remoting.CodePullMessage, remoting.CodeQueryConsumerOffset, remoting.CodeUpdateConsumerOffset:
		if err := checkConsume(p, req.Field("topic")); err != nil {
			return err
		}
		return p.Check(auth.Group, req.Field("consumerGroup"))
	case remoting.CodeGetMaxOffset, remoting.CodeGetMinOffset, remoting.CodeSearchOffsetByTime:
		return checkConsume(p, req.Field("topic"))
	case remoting.CodeHeartbeat:
		var hb heartbeat
		if err := json.Unmarshal(req.Body, &hb); err != nil {
			return fmt.Errorf("heartbeat body: %w", err)
		}
		for _, c := range hb.Consumers {
			if c.Group == "" {
				continue // ignored by the heartbeat too
			}
			if err := p.Check(auth.Group, c.Group); err != nil {
				return err
			}
		}
		return nil
	case remoting.CodeUnregisterClient:
		if g := req.Field("consumerGroup"); g != "" {
			return p.Check(auth.Group, g)
		}
		return nil
	case remoting.CodeGetConsumerListByGroup:
		return p.Check(auth.Group, strings.TrimSpace(req.Field("consumerGroup")))
	case remoting.CodeConsumerSendMsgBack:
		// The original message's topic is checked once it is read.
		return p.Check(auth.Group, req.Field("group"))
	}
	// Routes, and codes not served (answered REQUEST_CODE_NOT_SUPPORTED):
	// any authenticated principal.
	return p.Check(auth.Read, "")
}

func isSend(code int16) bool {
	return code == remoting.CodeSendMessage || code == remoting.CodeSendMessageV2 || code == remoting.CodeSendBatchMessage
}

// groupTopicOwner is the group whose retry or dead-letter topic topic is
// ("" for any other topic).
func groupTopicOwner(topic string) string {
	for _, prefix := range []string{retryPrefix, dlqPrefix} {
		if g, ok := strings.CutPrefix(topic, prefix); ok {
			return g
		}
	}
	return ""
}

// checkProduce: Produce on topic, or Group on the group whose retry or
// dead-letter topic it is (its consumers send failed messages back there).
func checkProduce(p *auth.Principal, topic string) error {
	if g := groupTopicOwner(topic); g != "" && p.Allowed(auth.Group, g) {
		return nil
	}
	return p.Check(auth.Produce, topic)
}

// checkConsume: Consume on topic, or Group on the group whose retry or
// dead-letter topic it is (its consumers read it without naming it).
func checkConsume(p *auth.Principal, topic string) error {
	if g := groupTopicOwner(topic); g != "" && p.Allowed(auth.Group, g) {
		return nil
	}
	return p.Check(auth.Consume, topic)
}

// checkSendBack: a send back copies the message at a commitlog offset into
// the group's retry topic, which the group's consumers read; so the caller
// must be able to read the original's topic, or any offset would leak.
func checkSendBack(p *auth.Principal, orig store.Message) error {
	return checkConsume(p, orig.Topic)
}
