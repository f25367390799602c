package broker

import (
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/auth"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/remoting"
)

// fuzzFields decodes "key=value" lines into a command's ext fields.
func fuzzFields(s string) map[string]string {
	fields := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			fields[k] = v
		}
	}
	return fields
}

// encodeFuzzFields is fuzzFields' inverse, for the seeds.
func encodeFuzzFields(fields map[string]string) string {
	var b strings.Builder
	for k, v := range fields {
		b.WriteString(k + "=" + v + "\n")
	}
	return b.String()
}

// FuzzServe sends arbitrary requests (code, ext fields, body) to a broker
// over a real connection to a real store: every request is answered on the
// same connection, and every send the broker acknowledges reads back from
// the store at the commitlog offset its msgId names, with the topic and
// queue it answered.
func FuzzServe(f *testing.F) {
	sendV2 := remoting.SendHeader{ProducerGroup: "pg", Topic: "fuzz", QueueID: 1, BornTimestamp: 1,
		Properties: props("TAGS", "a", "KEYS", "k1 k2")}
	batch, err := remoting.AppendBatchMessage(nil, remoting.BatchMessage{Body: []byte("one"), Properties: []byte(props("KEYS", "k"))})
	if err != nil {
		f.Fatal(err)
	}
	batchHeader := sendV2
	batchHeader.Batch = true
	for _, seed := range []struct {
		code   int16
		fields map[string]string
		body   []byte
	}{
		{remoting.CodeSendMessageV2, sendV2.Fields(true), []byte("hello")},
		{remoting.CodeSendMessage, sendV2.Fields(false), []byte("hello")},
		{remoting.CodeSendBatchMessage, batchHeader.Fields(true), batch},
		{remoting.CodeGetRouteInfoByTopic, map[string]string{"topic": "fuzz"}, nil},
		{remoting.CodeGetMaxOffset, map[string]string{"topic": "fuzz", "queueId": "1"}, nil},
		{remoting.CodeSearchOffsetByTime, map[string]string{"topic": "fuzz", "queueId": "1", "timestamp": "1"}, nil},
		{remoting.CodeHeartbeat, nil, []byte(`{"clientID":"c1","consumerDataSet":[{"groupName":"g","subscriptionDataSet":[{"topic":"fuzz"}]}]}`)},
		{remoting.CodePullMessage, pullRequestCmd("fuzz", 0, pullFlagCommitOffset|pullFlagSuspend, map[string]string{"subscription": "a || b"}).ExtFields, nil},
		{remoting.CodeQueryConsumerOffset, map[string]string{"consumerGroup": "g", "topic": "fuzz", "queueId": "1"}, nil},
		{remoting.CodeUpdateConsumerOffset, map[string]string{"consumerGroup": "g", "topic": "fuzz", "queueId": "1", "commitOffset": "1"}, nil},
		{remoting.CodeGetConsumerListByGroup, map[string]string{"consumerGroup": "g"}, nil},
		{remoting.CodeUnregisterClient, map[string]string{"consumerGroup": "g", "clientID": "c1"}, nil},
		{999, nil, nil},
	} {
		f.Add(seed.code, encodeFuzzFields(seed.fields), seed.body)
	}
	be := newStoreBackend(f)
	s := serve(f, be)
	f.Fuzz(func(t *testing.T, code int16, fields string, body []byte) {
		req := &remoting.Command{Code: code, ExtFields: fuzzFields(fields), Body: body}
		if code == remoting.CodePullMessage { // a long poll is held up to its timeout: keep each input short
			req.ExtFields["suspendTimeoutMillis"] = "20"
		}
		resp := invoke(t, s.brokerClient, req)
		if !resp.IsResponse() {
			t.Fatalf("code %d answered with a request (code %d)", code, resp.Code)
		}
		isSend := code == remoting.CodeSendMessage || code == remoting.CodeSendMessageV2 || code == remoting.CodeSendBatchMessage
		if !isSend || resp.Code != remoting.CodeSuccess {
			return
		}
		h, err := remoting.ParseSendHeader(req)
		if err != nil {
			t.Fatalf("send acknowledged although its header does not parse: %v", err)
		}
		for _, id := range strings.Split(resp.ExtFields["msgId"], ",") {
			_, phy, err := message.ParseOffsetMsgID(id)
			if err != nil {
				t.Fatalf("acknowledged msgId %q: %v", id, err)
			}
			m, err := be.st.LookupByOffset(phy)
			if err != nil {
				t.Fatalf("acknowledged message %s does not read back: %v", id, err)
			}
			if m.Topic != h.Topic || resp.ExtFields["queueId"] != strconv.Itoa(int(m.QueueID)) {
				t.Fatalf("message %s stored in %s/%d; the answer named %s/%s", id, m.Topic, m.QueueID, h.Topic, resp.ExtFields["queueId"])
			}
		}
	})
}

// FuzzServeACL sends arbitrary requests (code, ext fields, body) to a
// broker with ACL on; when secret is set, the request is signed with it as
// a client would, under the AccessKey its fields name (testAuthFile's
// secrets are SK-<user> for AK-<user>). Every request is answered; one
// whose credential does not authenticate (nor carries the node token on a
// relayed request) is refused NO_PERMISSION and stores nothing; a send or
// pull served came from a principal allowed to make it.
func FuzzServeACL(f *testing.F) {
	sendV2 := remoting.SendHeader{ProducerGroup: "pg", Topic: "orders", QueueID: 1, BornTimestamp: 1, Properties: props("TAGS", "a")}
	relayed := sendV2.Fields(true)
	relayed[relayedField], relayed[nodeTokenField] = "1", testNodeToken
	withKey := func(fields map[string]string, ak string) string {
		fields = maps.Clone(fields)
		fields["AccessKey"] = ak
		return encodeFuzzFields(fields)
	}
	pull := pullRequestCmd("orders", 0, pullFlagCommitOffset, map[string]string{"consumerGroup": "billing"}).ExtFields
	for _, seed := range []struct {
		code   int16
		fields string
		body   []byte
		secret string
	}{
		{remoting.CodeSendMessageV2, withKey(sendV2.Fields(true), "AK-app"), []byte("hello"), "SK-app"},
		{remoting.CodeSendMessageV2, withKey(sendV2.Fields(true), "AK-app"), []byte("hello"), "SK-wrong"},
		{remoting.CodeSendMessageV2, withKey(sendV2.Fields(true), "AK-gone"), []byte("hello"), "SK-gone"},
		{remoting.CodeSendMessageV2, encodeFuzzFields(sendV2.Fields(true)) + "AccessKey=AK-app\nSignature=AAAA\n", []byte("x"), ""},
		{remoting.CodeSendMessageV2, encodeFuzzFields(relayed), []byte("relayed"), ""},
		{remoting.CodePullMessage, withKey(pull, "AK-app"), nil, "SK-app"},
		{remoting.CodePullMessage, withKey(pull, "AK-shipper"), nil, "SK-shipper"},
		{remoting.CodeHeartbeat, "AccessKey=AK-app\n", []byte(`{"clientID":"c1","consumerDataSet":[{"groupName":"billing"}]}`), "SK-app"},
		{remoting.CodeConsumerSendMsgBack, "AccessKey=AK-grouponly\ngroup=billing\noffset=0\ndelayLevel=1\n", nil, "SK-grouponly"},
		{remoting.CodeGetRouteInfoByTopic, "topic=orders\n", nil, ""},
	} {
		f.Add(seed.code, seed.fields, seed.body, seed.secret)
	}
	a, _ := openAuth(f, testAuthFile, func() time.Time { return beforeExpiry })
	be := newStoreBackend(f)
	be.brokers = Brokers{Leader: "127.0.0.1:10911"}
	s := serve(f, be, withAuth(a))
	f.Fuzz(func(t *testing.T, code int16, fields string, body []byte, secret string) {
		req := &remoting.Command{Code: code, ExtFields: fuzzFields(fields), Body: body}
		if code == remoting.CodePullMessage { // a long poll is held up to its timeout: keep each input short
			req.ExtFields["suspendTimeoutMillis"] = "20"
		}
		if secret != "" {
			sign(req, req.ExtFields["AccessKey"], secret)
		}
		// What the broker reads: the JSON header turns invalid UTF-8 into
		// U+FFFD.
		frame, err := remoting.AppendFrame(nil, req)
		if err != nil {
			t.Skip(err)
		}
		sent, err := remoting.DecodeFrame(frame[4:])
		if err != nil {
			t.Fatalf("our own frame does not decode: %v", err)
		}
		var p *auth.Principal
		var authErr error
		if sent.Field(relayedField) != "" {
			if sent.Field(nodeTokenField) == testNodeToken {
				p = &auth.Principal{Name: "node", Node: true}
			} else {
				authErr = auth.ErrUnauthenticated
			}
		} else {
			p, authErr = a.Signature(sent.ExtFields, sent.Body)
		}
		before := be.st.Stats().Messages
		resp := invoke(t, s.brokerClient, req)
		if !resp.IsResponse() {
			t.Fatalf("code %d answered with a request (code %d)", code, resp.Code)
		}
		if authErr != nil {
			if resp.Code != remoting.CodeNoPermission || be.st.Stats().Messages != before {
				t.Fatalf("unauthenticated (%v) code %d: answer %d (%s), %d messages stored", authErr, code, resp.Code, resp.Remark,
					be.st.Stats().Messages-before)
			}
			return
		}
		if resp.Code != remoting.CodeSuccess {
			return
		}
		switch {
		case isSend(code):
			h, err := remoting.ParseSendHeader(sent)
			if err != nil || !mayUse(p, auth.Produce, h.Topic) {
				t.Fatalf("%s's send to %q served (%v)", p.Name, h.Topic, err)
			}
		case code == remoting.CodePullMessage:
			if !mayUse(p, auth.Consume, sent.Field("topic")) || !p.Allowed(auth.Group, sent.Field("consumerGroup")) {
				t.Fatalf("%s's pull of %q in %q served", p.Name, sent.Field("topic"), sent.Field("consumerGroup"))
			}
		}
	})
}

// mayUse is what FuzzServeACL holds the broker to: role on topic, or group
// on the group whose retry or dead-letter topic it is.
func mayUse(p *auth.Principal, role auth.Role, topic string) bool {
	for _, prefix := range []string{"%RETRY%", "%DLQ%"} {
		if g, ok := strings.CutPrefix(topic, prefix); ok && g != "" && p.Allowed(auth.Group, g) {
			return true
		}
	}
	return p.Allowed(role, topic)
}
