package broker

import (
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/quota"
	"github.com/raftmq/raftmq/remoting"
)

// TestSendsArePacedPerClient: with a produce quota a client's sends beyond
// its rate are answered SYSTEM_BUSY naming the quota, and stored nothing;
// once the rate allows, sends go through again.
func TestSendsArePacedPerClient(t *testing.T) {
	now := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	lim := quota.New(quota.Config{MessagesPerSecond: 2}, func() time.Time { return now })
	be := newStoreBackend(t)
	s := serve(t, be, func(o *Options) { o.Produce = lim })
	h := remoting.SendHeader{ProducerGroup: "pg", Topic: "orders", DefaultTopic: "TBW102", DefaultTopicQueueNums: 4, QueueID: 0}
	for i := range 2 {
		if resp := invoke(t, s.brokerClient, sendRequest(remoting.CodeSendMessageV2, h, []byte("ok"))); resp.Code != remoting.CodeSuccess {
			t.Fatalf("send %d within the quota: %d %s", i, resp.Code, resp.Remark)
		}
	}
	// Three more at once need 1.5 s: refused.
	var body []byte
	for _, b := range []string{"a", "b", "c"} {
		var err error
		if body, err = remoting.AppendBatchMessage(body, remoting.BatchMessage{Body: []byte(b)}); err != nil {
			t.Fatal(err)
		}
	}
	bh := h
	bh.Batch = true
	resp := invoke(t, s.brokerClient, sendRequest(remoting.CodeSendBatchMessage, bh, body))
	if resp.Code != remoting.CodeSystemBusy || !strings.Contains(resp.Remark, "quota exceeded") {
		t.Fatalf("over the quota: %d %q, want SYSTEM_BUSY naming the quota", resp.Code, resp.Remark)
	}
	if got := len(readQueue(t, be.st, "orders", 0)); got != 2 {
		t.Fatalf("queue holds %d messages, want the 2 admitted", got)
	}
	if st := s.b.Stats(); st.Limited != 1 {
		t.Fatalf("limited %d, want 1", st.Limited)
	}
	now = now.Add(2 * time.Second)
	if resp := invoke(t, s.brokerClient, sendRequest(remoting.CodeSendMessageV2, h, []byte("later"))); resp.Code != remoting.CodeSuccess {
		t.Fatalf("after the rate allowed: %d %s", resp.Code, resp.Remark)
	}
}
