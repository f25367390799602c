package broker

import (
	"strconv"
	"strings"
	"testing"

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
