package broker

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/store"
)

// readQueue reads every message of a queue from the start.
func readQueue(t *testing.T, r store.Reader, topic string, queue int32) []store.Message {
	t.Helper()
	res, err := r.GetMessages(topic, queue, 0, 1000, 64<<20, "")
	if err != nil {
		t.Fatalf("read %s/%d: %v", topic, queue, err)
	}
	return res.Messages
}

func property(t *testing.T, m store.Message, key string) string {
	t.Helper()
	v, _ := m.Property(key)
	return v
}

// TestSendStoresWhatTheClientSent: SEND_MESSAGE (long field names) and
// SEND_MESSAGE_V2 (short names) store topic, queue, flags, born timestamp,
// reconsume times, body and properties as sent, the client connection as
// born host; the answer names the offset msgId, queue and queue offset
// that a read finds the message at, and UNIQ_KEY is its msgId on reads.
func TestSendStoresWhatTheClientSent(t *testing.T) {
	be := newStoreBackend(t)
	s := serve(t, be)
	born := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC).UnixMilli()
	for i, code := range []int16{remoting.CodeSendMessage, remoting.CodeSendMessageV2} {
		uniq := fmt.Sprintf("7F000001%024d", i)
		h := remoting.SendHeader{ProducerGroup: "pg", Topic: "orders", DefaultTopic: "TBW102", DefaultTopicQueueNums: 4,
			QueueID: 2, SysFlag: 0, BornTimestamp: born + int64(i), Flag: 7, ReconsumeTimes: int32(i),
			Properties: props("TAGS", "TagA", "KEYS", "order-1 order-2", "UNIQ_KEY", uniq, "WAIT", "true")}
		body := []byte("body of send " + strconv.Itoa(i))
		resp := invoke(t, s.brokerClient, sendRequest(code, h, body))
		if resp.Code != remoting.CodeSuccess {
			t.Fatalf("code %d send: answer %d (%s)", code, resp.Code, resp.Remark)
		}
		if resp.Field("queueId") != "2" || resp.Field("queueOffset") != strconv.Itoa(i) || len(resp.Field("msgId")) != message.OffsetMsgIDLen {
			t.Fatalf("code %d send: answer fields %v, want queueId 2, queueOffset %d, a %d-char msgId", code, resp.ExtFields, i, message.OffsetMsgIDLen)
		}
		msgs := readQueue(t, be.st, "orders", 2)
		if len(msgs) != i+1 {
			t.Fatalf("queue holds %d messages after send %d", len(msgs), i)
		}
		m := msgs[i]
		if string(m.Body) != string(body) || m.Flag != 7 || m.BornTimestamp != born+int64(i) || m.ReconsumeTimes != int32(i) ||
			m.BornHost.IP != [4]byte{127, 0, 0, 1} || m.BornHost.Port == 0 {
			t.Fatalf("stored %+v", m)
		}
		if property(t, m, "TAGS") != "TagA" || property(t, m, "KEYS") != "order-1 order-2" || property(t, m, "UNIQ_KEY") != uniq {
			t.Fatalf("stored properties %q", m.Properties)
		}
		if found, err := be.st.LookupByMsgID("orders", uniq); err != nil || len(found) != 1 || string(found[0].Body) != string(body) {
			t.Fatalf("lookup by UNIQ_KEY %s: %d found, %v", uniq, len(found), err)
		}
		if found, err := be.st.LookupByMsgID("orders", resp.Field("msgId")); err != nil || len(found) != 1 || string(found[0].Body) != string(body) {
			t.Fatalf("lookup by the answered offset msgId %s: %d found, %v", resp.Field("msgId"), len(found), err)
		}
	}
}

// TestSendBatch: a SEND_BATCH_MESSAGE body becomes one send of its
// messages, each with its own flag, body and properties; the answer lists
// their offset msgIds and the first one's queue offset.
func TestSendBatch(t *testing.T) {
	be := newStoreBackend(t)
	s := serve(t, be)
	var body []byte
	const n = 5
	for i := range n {
		var err error
		body, err = remoting.AppendBatchMessage(body, remoting.BatchMessage{Flag: int32(i), Body: []byte("batch body " + strconv.Itoa(i)),
			Properties: []byte(props("UNIQ_KEY", "U"+strconv.Itoa(i), "KEYS", "k"+strconv.Itoa(i)))})
		if err != nil {
			t.Fatal(err)
		}
	}
	h := remoting.SendHeader{ProducerGroup: "pg", Topic: "batched", QueueID: 1, BornTimestamp: 1, Batch: true}
	resp := invoke(t, s.brokerClient, sendRequest(remoting.CodeSendBatchMessage, h, body))
	if resp.Code != remoting.CodeSuccess {
		t.Fatalf("batch: answer %d (%s)", resp.Code, resp.Remark)
	}
	if ids := strings.Split(resp.Field("msgId"), ","); len(ids) != n || resp.Field("queueOffset") != "0" || resp.Field("queueId") != "1" {
		t.Fatalf("batch answer fields %v: want %d msgIds, queue 1 from offset 0", resp.ExtFields, n)
	}
	msgs := readQueue(t, be.st, "batched", 1)
	if len(msgs) != n {
		t.Fatalf("queue holds %d messages, want %d", len(msgs), n)
	}
	for i, m := range msgs {
		if string(m.Body) != "batch body "+strconv.Itoa(i) || m.Flag != int32(i) || property(t, m, "UNIQ_KEY") != "U"+strconv.Itoa(i) {
			t.Fatalf("message %d stored as %+v", i, m)
		}
	}
}

// TestSendErrors: each refusal answers the code RocketMQ's clients act on,
// with the reason, and stores nothing.
func TestSendErrors(t *testing.T) {
	be := newStoreBackend(t)
	s := serve(t, be)
	good := remoting.SendHeader{Topic: "T", QueueID: 0, BornTimestamp: 1}
	badNumber := sendRequest(remoting.CodeSendMessage, good, []byte("x"))
	badNumber.ExtFields["queueId"] = "zero"
	outOfRange := good
	outOfRange.QueueID = 99
	badTopic := good
	badTopic.Topic = "bad topic/name"
	for _, c := range []struct {
		name string
		req  *remoting.Command
		busy error
		want int16
	}{
		{"unparsable header", badNumber, nil, remoting.CodeMessageIllegal},
		{"no topic", sendRequest(remoting.CodeSendMessage, remoting.SendHeader{}, []byte("x")), nil, remoting.CodeMessageIllegal},
		{"queue out of range", sendRequest(remoting.CodeSendMessage, outOfRange, []byte("x")), nil, remoting.CodeMessageIllegal},
		{"illegal topic", sendRequest(remoting.CodeSendMessage, badTopic, []byte("x")), nil, remoting.CodeMessageIllegal},
		{"truncated batch", sendRequest(remoting.CodeSendBatchMessage, good, []byte{0, 0, 0, 40, 1}), nil, remoting.CodeMessageIllegal},
		{"busy node", sendRequest(remoting.CodeSendMessage, good, []byte("x")), fmt.Errorf("queue full: %w", ErrBusy), remoting.CodeSystemBusy},
		{"outcome unknown", sendRequest(remoting.CodeSendMessage, good, []byte("x")), errors.New("leadership lost while committing"), remoting.CodeSystemError},
		{"unknown code", &remoting.Command{Code: 9999}, nil, remoting.CodeRequestNotSupported},
	} {
		be.mu.Lock()
		be.sendErr = c.busy
		be.mu.Unlock()
		resp := invoke(t, s.brokerClient, c.req)
		if resp.Code != c.want || resp.Remark == "" {
			t.Errorf("%s: answer %d (%q), want %d with a reason", c.name, resp.Code, resp.Remark, c.want)
		}
	}
	if st := be.st.Stats(); st.Messages != 0 {
		t.Fatalf("refused sends stored %d messages", st.Messages)
	}
	if got := s.b.Stats(); got.Failed != 7 || got.Unsupported != 1 || got.Sends != 0 {
		t.Fatalf("stats %+v, want 7 failed, 1 unsupported, no send", got)
	}
}

// TestFollowerRelaysSends: a member that is not the leader relays a send
// (and a route of a topic it does not hold) to the leader's broker address
// and answers with the leader's answer; a
// relayed send that meets another non-leader is refused with
// SERVICE_NOT_AVAILABLE (no relay loops), as is one with no leader known.
func TestFollowerRelaysSends(t *testing.T) {
	leaderBE, followerBE := newStoreBackend(t), newStoreBackend(t)
	leader := serve(t, leaderBE)
	followerBE.leader = false
	followerBE.brokers = Brokers{Leader: leader.brokerAddr}
	follower := serve(t, followerBE)
	h := remoting.SendHeader{Topic: "relayed", QueueID: 3, BornTimestamp: 1, Properties: props("UNIQ_KEY", "R1")}
	resp := invoke(t, follower.brokerClient, sendRequest(remoting.CodeSendMessage, h, []byte("via the follower")))
	if resp.Code != remoting.CodeSuccess || resp.Field("queueId") != "3" {
		t.Fatalf("relayed send: answer %d (%s) %v", resp.Code, resp.Remark, resp.ExtFields)
	}
	if msgs := readQueue(t, leaderBE.st, "relayed", 3); len(msgs) != 1 || string(msgs[0].Body) != "via the follower" {
		t.Fatalf("leader holds %d messages after the relay", len(msgs))
	}
	if followerBE.st.Stats().Messages != 0 || follower.b.Stats().Relayed != 1 || leader.b.Stats().Sends != 1 {
		t.Fatalf("follower stored %d, relayed %d; leader stored %d sends", followerBE.st.Stats().Messages,
			follower.b.Stats().Relayed, leader.b.Stats().Sends)
	}
	// The follower's store has not got the topic the send created: its
	// name server answers the route with the leader's.
	leaderBE.mu.Lock()
	leaderBE.brokers = Brokers{Leader: leader.brokerAddr}
	leaderBE.mu.Unlock()
	if resp := invoke(t, follower.nsClient, routeRequest("relayed")); resp.Code != remoting.CodeSuccess || follower.b.Stats().Relayed != 2 {
		t.Fatalf("route of a topic only the leader holds, asked of a follower: code %d (%s), relayed %d", resp.Code, resp.Remark, follower.b.Stats().Relayed)
	}
	if resp := invoke(t, follower.nsClient, routeRequest("nowhere")); resp.Code != remoting.CodeTopicNotExist {
		t.Fatalf("route of a topic no member holds: code %d (%s)", resp.Code, resp.Remark)
	}

	leaderBE.mu.Lock()
	leaderBE.leader = false // leadership moved on: the relay target refuses
	leaderBE.brokers = Brokers{Leader: follower.brokerAddr}
	leaderBE.mu.Unlock()
	resp = invoke(t, follower.brokerClient, sendRequest(remoting.CodeSendMessage, h, []byte("loop")))
	if resp.Code != remoting.CodeServiceNotAvailable {
		t.Fatalf("send relayed to a non-leader: answer %d (%s), want SERVICE_NOT_AVAILABLE", resp.Code, resp.Remark)
	}
	followerBE.mu.Lock()
	followerBE.brokers = Brokers{}
	followerBE.mu.Unlock()
	resp = invoke(t, follower.brokerClient, sendRequest(remoting.CodeSendMessage, h, []byte("nowhere")))
	if resp.Code != remoting.CodeServiceNotAvailable {
		t.Fatalf("send with no leader known: answer %d (%s), want SERVICE_NOT_AVAILABLE", resp.Code, resp.Remark)
	}
}

// TestQueueOffsets: GET_MAX_OFFSET, GET_MIN_OFFSET and
// SEARCH_OFFSET_BY_TIMESTAMP read the store; a queue it does not hold is
// 0; an unparsable queue id is an error.
func TestQueueOffsets(t *testing.T) {
	be := newStoreBackend(t)
	s := serve(t, be)
	for i := range 3 {
		h := remoting.SendHeader{Topic: "T", QueueID: 1, BornTimestamp: 1}
		if resp := invoke(t, s.brokerClient, sendRequest(remoting.CodeSendMessage, h, []byte{byte(i)})); resp.Code != remoting.CodeSuccess {
			t.Fatalf("send: %d %s", resp.Code, resp.Remark)
		}
	}
	ask := func(code int16, topic, queue string) *remoting.Command {
		return invoke(t, s.brokerClient, &remoting.Command{Code: code, ExtFields: map[string]string{"topic": topic, "queueId": queue, "timestamp": "0"}})
	}
	for _, c := range []struct {
		code         int16
		topic, queue string
		want         string
	}{
		{remoting.CodeGetMaxOffset, "T", "1", "3"}, {remoting.CodeGetMinOffset, "T", "1", "0"},
		{remoting.CodeSearchOffsetByTime, "T", "1", "0"}, {remoting.CodeGetMaxOffset, "T", "0", "0"},
		{remoting.CodeGetMaxOffset, "nosuch", "0", "0"},
	} {
		resp := ask(c.code, c.topic, c.queue)
		if resp.Code != remoting.CodeSuccess || resp.Field("offset") != c.want {
			t.Errorf("code %d %s/%s: answer %d (%s) offset %q, want %s", c.code, c.topic, c.queue, resp.Code, resp.Remark, resp.Field("offset"), c.want)
		}
	}
	if resp := ask(remoting.CodeGetMaxOffset, "T", "one"); resp.Code != remoting.CodeSystemError {
		t.Fatalf("unparsable queue id: answer %d", resp.Code)
	}
}
