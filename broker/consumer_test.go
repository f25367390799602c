package broker

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/remoting"
)

// sendTagged stores one message per tag in topic's queue 0 over the broker
// protocol.
func sendTagged(t *testing.T, s *served, topic string, tags ...string) {
	t.Helper()
	for i, tag := range tags {
		h := remoting.SendHeader{ProducerGroup: "pg", Topic: topic, QueueID: 0, BornTimestamp: 1, Properties: props("TAGS", tag)}
		if resp := invoke(t, s.brokerClient, sendRequest(remoting.CodeSendMessageV2, h, []byte(tag+strconv.Itoa(i)))); resp.Code != remoting.CodeSuccess {
			t.Fatalf("send: %d %s", resp.Code, resp.Remark)
		}
	}
}

func pullRequestCmd(topic string, offset int64, sysFlag int, fields map[string]string) *remoting.Command {
	f := map[string]string{"consumerGroup": "g", "topic": topic, "queueId": "0", "queueOffset": strconv.FormatInt(offset, 10),
		"maxMsgNums": "32", "sysFlag": strconv.Itoa(sysFlag), "commitOffset": "0", "suspendTimeoutMillis": "0"}
	for k, v := range fields {
		f[k] = v
	}
	return &remoting.Command{Code: remoting.CodePullMessage, ExtFields: f}
}

// pulledTags decodes a pull answer's body into the records' tags.
func pulledTags(t *testing.T, body []byte) []string {
	t.Helper()
	var tags []string
	for len(body) > 0 {
		r, err := message.DecodeRecord(body)
		if err != nil {
			t.Fatalf("pull body: %v", err)
		}
		tag, _ := message.GetProperty(r.Properties, "TAGS")
		tags = append(tags, string(tag))
		body = body[r.Size:]
	}
	return tags
}

// TestPull: PULL_MESSAGE answers the queue's records as stored, filtered by
// the tag subscription, with nextBeginOffset/minOffset/maxOffset; the end
// of the queue is PULL_NOT_FOUND, an offset past it PULL_OFFSET_MOVED, an
// unknown topic TOPIC_NOT_EXIST, a bad header SYSTEM_ERROR and a SQL92
// subscription SUBSCRIPTION_PARSE_FAIL.
func TestPull(t *testing.T) {
	be := newStoreBackend(t)
	s := serve(t, be)
	sendTagged(t, s, "pulled", "a", "b", "a", "c", "b")
	for _, c := range []struct {
		req      *remoting.Command
		code     int16
		next     string
		tags     []string
		maxQueue string
	}{
		{pullRequestCmd("pulled", 0, 0, nil), remoting.CodeSuccess, "5", []string{"a", "b", "a", "c", "b"}, "5"},
		{pullRequestCmd("pulled", 1, 0, map[string]string{"maxMsgNums": "2"}), remoting.CodeSuccess, "3", []string{"b", "a"}, "5"},
		{pullRequestCmd("pulled", 0, 0, map[string]string{"subscription": "a || c"}), remoting.CodeSuccess, "", []string{"a", "a", "c"}, "5"},
		{pullRequestCmd("pulled", 3, 0, map[string]string{"subscription": "a"}), remoting.CodePullRetryImmediately, "5", nil, "5"},
		{pullRequestCmd("pulled", 5, 0, nil), remoting.CodePullNotFound, "5", nil, "5"},
		{pullRequestCmd("pulled", 99, 0, nil), remoting.CodePullOffsetMoved, "5", nil, "5"},
		{pullRequestCmd("nowhere", 0, 0, nil), remoting.CodeTopicNotExist, "", nil, ""},
		{pullRequestCmd("pulled", 0, 0, map[string]string{"queueId": "x"}), remoting.CodeSystemError, "", nil, ""},
		{pullRequestCmd("pulled", 0, 0, map[string]string{"expressionType": "SQL92"}), remoting.CodeSubscriptionParseFail, "", nil, ""},
	} {
		resp := invoke(t, s.brokerClient, c.req)
		if resp.Code != c.code {
			t.Fatalf("pull %v: code %d (%s), want %d", c.req.ExtFields, resp.Code, resp.Remark, c.code)
		}
		if c.next != "" && resp.Field("nextBeginOffset") != c.next {
			t.Fatalf("pull %v: nextBeginOffset %s, want %s", c.req.ExtFields, resp.Field("nextBeginOffset"), c.next)
		}
		if c.maxQueue != "" && (resp.Field("maxOffset") != c.maxQueue || resp.Field("minOffset") != "0") {
			t.Fatalf("pull %v: min/max offset %s/%s", c.req.ExtFields, resp.Field("minOffset"), resp.Field("maxOffset"))
		}
		if got := pulledTags(t, resp.Body); !slices.Equal(got, c.tags) {
			t.Fatalf("pull %v: tags %v, want %v", c.req.ExtFields, got, c.tags)
		}
	}
}

// TestPullLongPoll: a pull with the suspend flag at the end of the queue is
// held until its timeout when nothing arrives, and answered with the
// message as soon as one does.
func TestPullLongPoll(t *testing.T) {
	be := newStoreBackend(t)
	s := serve(t, be)
	sendTagged(t, s, "polled", "a")
	const hold = 300 * time.Millisecond
	start := time.Now()
	resp := invoke(t, s.brokerClient, pullRequestCmd("polled", 1, pullFlagSuspend, map[string]string{"suspendTimeoutMillis": "300"}))
	if resp.Code != remoting.CodePullNotFound || time.Since(start) < hold {
		t.Fatalf("suspended pull with nothing to read: code %d after %v, want PULL_NOT_FOUND after ≥ %v", resp.Code, time.Since(start), hold)
	}
	done := make(chan *remoting.Command, 1)
	go func() {
		r, err := s.brokerClient.Invoke(context.Background(), pullRequestCmd("polled", 1, pullFlagSuspend, map[string]string{"suspendTimeoutMillis": "20000"}))
		if err != nil {
			r = &remoting.Command{Code: -1, Remark: err.Error()}
		}
		done <- r
	}()
	sendTagged(t, s, "polled", "b")
	select {
	case resp = <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("the held pull was not answered when a message arrived")
	}
	if resp.Code != remoting.CodeSuccess || !slices.Equal(pulledTags(t, resp.Body), []string{"b"}) {
		t.Fatalf("held pull: code %d (%s), tags %v", resp.Code, resp.Remark, pulledTags(t, resp.Body))
	}
}

// TestConsumerOffsets: a group's offset is QUERY_NOT_FOUND until committed
// by UPDATE_CONSUMER_OFFSET or with a pull's commit flag; a member that is
// not the leader relays the update (here: no leader known, so
// SERVICE_NOT_AVAILABLE) and ignores a pull's commit.
func TestConsumerOffsets(t *testing.T) {
	be := newStoreBackend(t)
	s := serve(t, be)
	sendTagged(t, s, "committed", "a", "b", "c")
	query := &remoting.Command{Code: remoting.CodeQueryConsumerOffset, ExtFields: map[string]string{"consumerGroup": "g", "topic": "committed", "queueId": "0"}}
	update := func(off string) *remoting.Command {
		return invoke(t, s.brokerClient, &remoting.Command{Code: remoting.CodeUpdateConsumerOffset,
			ExtFields: map[string]string{"consumerGroup": "g", "topic": "committed", "queueId": "0", "commitOffset": off}})
	}
	if resp := invoke(t, s.brokerClient, query); resp.Code != remoting.CodeQueryNotFound {
		t.Fatalf("query before any commit: code %d", resp.Code)
	}
	if resp := update("2"); resp.Code != remoting.CodeSuccess {
		t.Fatalf("update: code %d (%s)", resp.Code, resp.Remark)
	}
	if resp := invoke(t, s.brokerClient, query); resp.Code != remoting.CodeSuccess || resp.Field("offset") != "2" {
		t.Fatalf("query after commit of 2: code %d offset %q", resp.Code, resp.Field("offset"))
	}
	invoke(t, s.brokerClient, pullRequestCmd("committed", 2, pullFlagCommitOffset, map[string]string{"commitOffset": "3"}))
	if resp := invoke(t, s.brokerClient, query); resp.Field("offset") != "3" {
		t.Fatalf("query after a pull committing 3: offset %q", resp.Field("offset"))
	}
	if resp := update("-1"); resp.Code != remoting.CodeSystemError {
		t.Fatalf("update to -1: code %d, want SYSTEM_ERROR", resp.Code)
	}
	be.mu.Lock()
	be.leader = false
	be.mu.Unlock()
	if resp := update("1"); resp.Code != remoting.CodeServiceNotAvailable {
		t.Fatalf("update on a follower with no leader known: code %d (%s)", resp.Code, resp.Remark)
	}
	invoke(t, s.brokerClient, pullRequestCmd("committed", 3, pullFlagCommitOffset, map[string]string{"commitOffset": "1"}))
	if resp := invoke(t, s.brokerClient, query); resp.Field("offset") != "3" {
		t.Fatalf("a follower's pull commit changed the offset to %q", resp.Field("offset"))
	}
}

// fakeClock is a broker's clock that moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// rawConn is a client connection that also sees the broker's requests.
type rawConn struct {
	nc net.Conn
	r  *bufio.Reader

	mu       sync.Mutex
	opaque   int32
	answers  chan *remoting.Command
	notified chan string // consumerGroup of each NOTIFY_CONSUMER_IDS_CHANGED
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := &rawConn{nc: nc, r: bufio.NewReader(nc), answers: make(chan *remoting.Command, 16), notified: make(chan string, 16)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			cmd, err := remoting.ReadCommand(c.r, remoting.DefaultMaxFrame)
			if err != nil {
				return
			}
			if cmd.IsResponse() {
				c.answers <- cmd
			} else if cmd.Code == remoting.CodeNotifyConsumerIDs {
				c.notified <- cmd.Field("consumerGroup")
			}
		}
	}()
	t.Cleanup(func() {
		_ = nc.Close()
		<-done
	})
	return c
}

func (c *rawConn) invoke(t *testing.T, req *remoting.Command) *remoting.Command {
	t.Helper()
	c.mu.Lock()
	c.opaque++
	req.Opaque = c.opaque
	b, err := remoting.AppendFrame(nil, req)
	if err == nil {
		_, err = c.nc.Write(b)
	}
	c.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	select {
	case resp := <-c.answers:
		return resp
	case <-time.After(10 * time.Second):
		t.Fatalf("no answer to code %d", req.Code)
		return nil
	}
}

func heartbeatCmd(t *testing.T, clientID string, groups ...string) *remoting.Command {
	t.Helper()
	var consumers []map[string]any
	for _, g := range groups {
		consumers = append(consumers, map[string]any{"groupName": g, "subscriptionDataSet": []map[string]any{{"topic": "t", "subString": "*"}}})
	}
	body, err := json.Marshal(map[string]any{"clientID": clientID, "consumerDataSet": consumers})
	if err != nil {
		t.Fatal(err)
	}
	return &remoting.Command{Code: remoting.CodeHeartbeat, Body: body}
}

func consumerIDs(t *testing.T, c *remoting.Client, group string) []string {
	t.Helper()
	resp := invoke(t, c, &remoting.Command{Code: remoting.CodeGetConsumerListByGroup, ExtFields: map[string]string{"consumerGroup": group}})
	if resp.Code != remoting.CodeSuccess {
		return nil
	}
	var list struct {
		IDs []string `json:"consumerIdList"`
	}
	if err := json.Unmarshal(resp.Body, &list); err != nil {
		t.Fatalf("consumer list %s: %v", resp.Body, err)
	}
	return list.IDs
}

func expectNotify(t *testing.T, c *rawConn, group string) {
	t.Helper()
	select {
	case g := <-c.notified:
		if g != group {
			t.Fatalf("notified of group %q, want %q", g, group)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no NOTIFY_CONSUMER_IDS_CHANGED for group %s", group)
	}
}

// TestConsumerGroups: heartbeats make clients members of their groups
// (GET_CONSUMER_LIST_BY_GROUP lists them, sorted) and create each group's
// retry topic; a member joining, unregistering or losing its connection
// notifies the others; a member not heard from for ConsumerExpiry leaves.
func TestConsumerGroups(t *testing.T) {
	be := newStoreBackend(t)
	clock := &fakeClock{now: time.Now()}
	s := serve(t, be, func(o *Options) { o.Now = clock.Now })
	c1, c2 := dialRaw(t, s.brokerAddr), dialRaw(t, s.brokerAddr)
	if resp := c1.invoke(t, heartbeatCmd(t, "client-1", "g")); resp.Code != remoting.CodeSuccess {
		t.Fatalf("heartbeat: %d %s", resp.Code, resp.Remark)
	}
	expectNotify(t, c1, "g")
	if _, ok := be.st.Topic("%RETRY%g"); !ok {
		t.Fatal("the group's retry topic was not created")
	}
	c2.invoke(t, heartbeatCmd(t, "client-2", "g"))
	expectNotify(t, c1, "g")
	expectNotify(t, c2, "g")
	if ids := consumerIDs(t, s.brokerClient, "g"); !slices.Equal(ids, []string{"client-1", "client-2"}) {
		t.Fatalf("members %v", ids)
	}
	if resp := c2.invoke(t, &remoting.Command{Code: remoting.CodeUnregisterClient,
		ExtFields: map[string]string{"clientID": "client-2", "consumerGroup": "g"}}); resp.Code != remoting.CodeSuccess {
		t.Fatalf("unregister: %d", resp.Code)
	}
	expectNotify(t, c1, "g")
	if ids := consumerIDs(t, s.brokerClient, "g"); !slices.Equal(ids, []string{"client-1"}) {
		t.Fatalf("members after client-2 unregistered: %v", ids)
	}

	c2.invoke(t, heartbeatCmd(t, "client-2", "g"))
	expectNotify(t, c1, "g")
	_ = c2.nc.Close()
	expectNotify(t, c1, "g")
	if ids := consumerIDs(t, s.brokerClient, "g"); !slices.Equal(ids, []string{"client-1"}) {
		t.Fatalf("members after client-2's connection closed: %v", ids)
	}

	clock.advance(ConsumerExpiry + time.Second)
	if ids := consumerIDs(t, s.brokerClient, "g"); len(ids) != 0 {
		t.Fatalf("members after %v without heartbeats: %v", ConsumerExpiry, ids)
	}
	if resp := c1.invoke(t, &remoting.Command{Code: remoting.CodeHeartbeat, Body: []byte("{")}); resp.Code != remoting.CodeSystemError {
		t.Fatalf("heartbeat with a bad body: code %d", resp.Code)
	}
}

// TestSendBack: CONSUMER_SEND_MSG_BACK stores the message at the offset
// again in the group's retry topic with reconsume times raised, its
// original topic in RETRY_TOPIC and its UNIQ_KEY kept; the store's
// schedule holds it back until its delay level passed; past
// maxReconsumeTimes it goes to the dead-letter topic; an offset with no
// message is SYSTEM_ERROR.
func TestSendBack(t *testing.T) {
	be := newStoreBackend(t)
	clock := &fakeClock{now: time.Now()}
	s := serve(t, be, func(o *Options) { o.Now = clock.Now })
	h := remoting.SendHeader{ProducerGroup: "pg", Topic: "orders", QueueID: 0, BornTimestamp: 1, Properties: props("TAGS", "a", "UNIQ_KEY", "U1")}
	resp := invoke(t, s.brokerClient, sendRequest(remoting.CodeSendMessageV2, h, []byte("handle me")))
	_, phy, err := message.ParseOffsetMsgID(resp.Field("msgId"))
	if err != nil {
		t.Fatal(err)
	}
	sendBack := func(offset int64, fields map[string]string) *remoting.Command {
		f := map[string]string{"group": "g", "offset": strconv.FormatInt(offset, 10), "delayLevel": "1", "originMsgId": "U1", "originTopic": "orders"}
		for k, v := range fields {
			f[k] = v
		}
		return invoke(t, s.brokerClient, &remoting.Command{Code: remoting.CodeConsumerSendMsgBack, ExtFields: f})
	}
	if resp := sendBack(phy, nil); resp.Code != remoting.CodeSuccess {
		t.Fatalf("send back: %d %s", resp.Code, resp.Remark)
	}
	pullRetry := func() *remoting.Command {
		return invoke(t, s.brokerClient, pullRequestCmd("%RETRY%g", 0, 0, nil))
	}
	if resp := pullRetry(); resp.Code != remoting.CodePullNotFound || resp.Field("nextBeginOffset") != "0" {
		t.Fatalf("pull of the retry before its 1 s delay: code %d next %s", resp.Code, resp.Field("nextBeginOffset"))
	}
	if n := be.deliver(t, time.Now()); n != 0 {
		t.Fatalf("delivered %d retries before their delay", n)
	}
	// The store holds the retry in its schedule topic until the delay
	// passed; the scheduler then copies it into the retry topic.
	clock.advance(2 * time.Second)
	if n := be.deliver(t, time.Now().Add(2*time.Second)); n != 1 {
		t.Fatalf("delivered %d retries after their delay, want 1", n)
	}
	resp = pullRetry()
	if resp.Code != remoting.CodeSuccess {
		t.Fatalf("pull of the retry after its delay: code %d (%s)", resp.Code, resp.Remark)
	}
	r, err := message.DecodeRecord(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	retryTopic, _ := message.GetProperty(r.Properties, "RETRY_TOPIC")
	uniq, _ := message.GetProperty(r.Properties, "UNIQ_KEY")
	if string(r.Body) != "handle me" || r.ReconsumeTimes != 1 || string(retryTopic) != "orders" || string(uniq) != "U1" {
		t.Fatalf("retry record: body %q reconsume %d RETRY_TOPIC %q UNIQ_KEY %q", r.Body, r.ReconsumeTimes, retryTopic, uniq)
	}
	if resp := sendBack(r.PhysicalOffset, map[string]string{"maxReconsumeTimes": "1"}); resp.Code != remoting.CodeSuccess {
		t.Fatalf("send back past max: %d %s", resp.Code, resp.Remark)
	}
	dlq := readQueue(t, be.st, "%DLQ%g", 0)
	if len(dlq) != 1 || string(dlq[0].Body) != "handle me" || dlq[0].ReconsumeTimes != 2 || property(t, dlq[0], "RETRY_TOPIC") != "orders" {
		t.Fatalf("dead-letter queue holds %+v", dlq)
	}
	if resp := sendBack(1<<40, nil); resp.Code != remoting.CodeSystemError {
		t.Fatalf("send back of an offset with no message: code %d", resp.Code)
	}
}
