package e2e_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/raftmq/raftmq/internal/nodeproc"
)

// delivery is one message a push consumer was handed.
type delivery struct {
	msgID, body, tag, keys string
	queue                  int
	queueOffset            int64
	bornMS, storeMS        int64
	reconsume              int32
}

// pushRecorder is a started push consumer and what it was handed.
type pushRecorder struct {
	name string
	c    rocketmq.PushConsumer

	mu  sync.Mutex
	got []delivery
}

// bodies counts the deliveries of each body.
func (r *pushRecorder) bodies() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for _, d := range r.got {
		out[d.body]++
	}
	return out
}

// deliveries copies what the consumer was handed so far.
func (r *pushRecorder) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// startPush starts a clustering push consumer of group on topic with a tag
// expression, from the first offset when the group has none; answer
// decides each message's result (nil: success).
func startPush(t *testing.T, ns []string, name, group, topic, expr string,
	answer func(*primitive.MessageExt) consumer.ConsumeResult) *pushRecorder {
	t.Helper()
	c, err := rocketmq.NewPushConsumer(consumer.WithNsResolver(primitive.NewPassthroughResolver(ns)),
		consumer.WithGroupName(group), consumer.WithInstance(name), consumer.WithConsumerModel(consumer.Clustering),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset), consumer.WithConsumeMessageBatchMaxSize(1),
		// Said explicitly: the Go client's WithTls sets a process-wide
		// default (its options point at one shared RemotingClientConfig),
		// so a TLS client made by an earlier test would turn this one's
		// connections into TLS too.
		consumer.WithTls(false))
	if err != nil {
		t.Fatal(err)
	}
	r := &pushRecorder{name: name, c: c}
	err = c.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: expr},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				if answer != nil && answer(m) != consumer.ConsumeSuccess {
					return consumer.ConsumeRetryLater, nil
				}
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			for _, m := range msgs {
				r.got = append(r.got, delivery{msgID: m.MsgId, body: string(m.Body), tag: m.GetTags(), keys: m.GetKeys(),
					queue: m.Queue.QueueId, queueOffset: m.QueueOffset, bornMS: m.BornTimestamp, storeMS: m.StoreTimestamp,
					reconsume: m.ReconsumeTimes})
			}
			return consumer.ConsumeSuccess, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatalf("consumer %s: %v", name, err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = c.Shutdown()
		}
	})
	return r
}

// stop shuts the consumer down (its offsets are committed on the way).
func (r *pushRecorder) stop(t *testing.T) {
	t.Helper()
	if err := r.c.Shutdown(); err != nil {
		t.Fatalf("consumer %s shutdown: %v", r.name, err)
	}
}

// waitFor polls cond every 100 ms until it holds or ctx ends.
func waitFor(ctx context.Context, what string, cond func() bool) error {
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// rocketmqCluster starts three nodes serving the RocketMQ protocols, with
// the Apache client's own logging quietened to errors.
func rocketmqCluster(t *testing.T) *nodeproc.Cluster {
	t.Helper()
	rlog.SetLogLevel("error")
	return startCluster(t, 3, func(o *nodeproc.ClusterOptions) { o.Remoting = true })
}

// nameServers is every node's name-server address.
func nameServers(c *nodeproc.Cluster) []string {
	var ns []string
	for _, n := range c.Nodes {
		ns = append(ns, n.Spec().NamesrvAddr)
	}
	return ns
}

// rocketmqProducer starts an Apache producer resolving through ns.
func rocketmqProducer(t *testing.T, ns []string, group string) rocketmq.Producer {
	t.Helper()
	p, err := rocketmq.NewProducer(producer.WithNsResolver(primitive.NewPassthroughResolver(ns)),
		producer.WithGroupName(group), producer.WithRetry(2), producer.WithSendMsgTimeout(10*time.Second),
		producer.WithDefaultTopicQueueNums(8), producer.WithTls(false)) // see startPush
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown() })
	return p
}

// produced is the bodies acknowledged so far and their tags.
type produced struct {
	mu   sync.Mutex
	tags map[string]string // body → tag ("" for none)
}

func (p *produced) add(body, tag string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tags[body] = tag
}

func (p *produced) snapshot() map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.tags)
}

// sendMix sends n messages named prefix-i to topic: a tenth with SendSync,
// a fifth in batches of 50 and the rest with SendAsync (at most 256 in
// flight); single messages alternate tags a and b, batched ones carry
// none. Every acknowledged body is added to acked.
func sendMix(t *testing.T, ctx context.Context, p rocketmq.Producer, topic, prefix string, n int, acked *produced) {
	t.Helper()
	msg := func(i int) (*primitive.Message, string) {
		body := prefix + "-" + strconv.Itoa(i)
		m := primitive.NewMessage(topic, []byte(body))
		m.WithKeys([]string{body})
		return m, body
	}
	syncN, batchN := n/10, n/5/50*50
	for i := 0; i < syncN; i++ {
		m, body := msg(i)
		tag := []string{"a", "b"}[i%2]
		m.WithTag(tag)
		res, err := p.SendSync(ctx, m)
		if err != nil || res.Status != primitive.SendOK {
			t.Fatalf("SendSync %s: %v %v", body, res, err)
		}
		acked.add(body, tag)
	}
	for i := syncN; i < syncN+batchN; i += 50 {
		var batch []*primitive.Message
		var bodies []string
		for k := i; k < i+50; k++ {
			m, body := msg(k)
			batch, bodies = append(batch, m), append(bodies, body)
		}
		res, err := p.SendSync(ctx, batch...)
		if err != nil || res.Status != primitive.SendOK {
			t.Fatalf("batch from %s: %v %v", bodies[0], res, err)
		}
		for _, body := range bodies {
			acked.add(body, "")
		}
	}
	slots := make(chan struct{}, 256)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []error
	for i := syncN + batchN; i < n; i++ {
		m, body := msg(i)
		tag := []string{"a", "b"}[i%2]
		m.WithTag(tag)
		slots <- struct{}{}
		wg.Add(1)
		err := p.SendAsync(ctx, func(_ context.Context, res *primitive.SendResult, err error) {
			defer wg.Done()
			defer func() { <-slots }()
			if err == nil && res.Status == primitive.SendOK {
				acked.add(body, tag)
				return
			}
			mu.Lock()
			failures = append(failures, fmt.Errorf("SendAsync %s: %v %v", body, res, err))
			mu.Unlock()
		}, m)
		if err != nil {
			wg.Done()
			<-slots
			t.Fatalf("SendAsync %s: %v", body, err)
		}
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d async sends failed, first: %v", len(failures), failures[0])
	}
}

// queuesOf is the queues a consumer received the bodies with prefix from.
func queuesOf(r *pushRecorder, prefix string) map[int]bool {
	qs := map[int]bool{}
	for _, d := range r.deliveries() {
		if strings.HasPrefix(d.body, prefix) {
			qs[d.queue] = true
		}
	}
	return qs
}

// settleRound sends rounds of 100 messages until one round reaches every
// member from disjoint queues (the group's rebalance settled), and checks
// that round delivered each message to one member, once.
func settleRound(t *testing.T, ctx context.Context, p rocketmq.Producer, topic, label string, members []*pushRecorder, acked *produced) {
	t.Helper()
	for round := 0; ; round++ {
		prefix := fmt.Sprintf("%s-%d-", label, round)
		sendMix(t, ctx, p, topic, prefix, 100, acked)
		sent := 0
		for body := range acked.snapshot() {
			if strings.HasPrefix(body, prefix) {
				sent++
			}
		}
		deliveries := func() map[string]int {
			got := map[string]int{}
			for _, m := range members {
				for body, n := range m.bodies() {
					if strings.HasPrefix(body, prefix) {
						got[body] += n
					}
				}
			}
			return got
		}
		if err := waitFor(ctx, "round "+prefix, func() bool { return len(deliveries()) >= sent }); err != nil {
			t.Fatal(err)
		}
		settled := true
		owner := map[int]string{}
		for _, m := range members {
			qs := queuesOf(m, prefix)
			settled = settled && len(qs) > 0
			for q := range qs {
				if other, ok := owner[q]; ok {
					settled = false
					t.Logf("round %s: queue %d reached both %s and %s (rebalance under way)", prefix, q, other, m.name)
				}
				owner[q] = m.name
			}
		}
		if !settled {
			if ctx.Err() != nil {
				t.Fatalf("the group never split the queues among %d members", len(members))
			}
			continue
		}
		for body, n := range deliveries() {
			if n != 1 {
				t.Fatalf("round %s, after the rebalance settled: %q delivered %d times", prefix, body, n)
			}
		}
		return
	}
}

// undelivered is the acknowledged bodies no member got.
func undelivered(acked *produced, members []*pushRecorder) []string {
	got := map[string]bool{}
	for _, m := range members {
		for body := range m.bodies() {
			got[body] = true
		}
	}
	var lost []string
	for body := range acked.snapshot() {
		if !got[body] {
			lost = append(lost, body)
		}
	}
	slices.Sort(lost)
	return lost
}

// TestRocketMQPushConsumer drives the unchanged Apache RocketMQ Go client
// against a three-node cluster: 10,000 messages sent with SendSync,
// SendAsync and batches, with keys and tags, are consumed exactly once by a
// push consumer in clustering mode, and a consumer subscribed to tag a gets
// exactly the tag-a messages; a second consumer joining the group takes a
// disjoint, non-empty share of the queues, a third joining triggers another
// rebalance, and no message is lost; a consumer started again after the
// group stopped resumes from the committed offsets.
func TestRocketMQPushConsumer(t *testing.T) {
	c := rocketmqCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ns := nameServers(c)
	const topic, group = "e2e-push", "e2e-push-group"
	p := rocketmqProducer(t, ns, "e2e-push-producer")
	acked := &produced{tags: map[string]string{}}
	// The topic exists before the consumers subscribe to it.
	sendMix(t, ctx, p, topic, "warm", 10, acked)

	// A consumer of its own topic answers RECONSUME_LATER to each message
	// the first time: the broker redelivers it through %RETRY%<group>.
	var retryMu sync.Mutex
	refused := map[string]int{}
	sendMix(t, ctx, p, "e2e-retry", "retry", 10, &produced{tags: map[string]string{}})
	retrying := startPush(t, ns, "r", "e2e-retry-group", "e2e-retry", "*", func(m *primitive.MessageExt) consumer.ConsumeResult {
		retryMu.Lock()
		defer retryMu.Unlock()
		if refused[string(m.Body)] == 0 {
			refused[string(m.Body)]++
			return consumer.ConsumeRetryLater
		}
		return consumer.ConsumeSuccess
	})

	a := startPush(t, ns, "a", group, topic, "*", nil)
	tagged := startPush(t, ns, "tags", "e2e-push-tags", topic, "a", nil)
	sendMix(t, ctx, p, topic, "first", 10000, acked)
	want := acked.snapshot()
	if err := waitFor(ctx, "consumer a to get all 10,010 messages", func() bool { return len(a.bodies()) >= len(want) }); err != nil {
		t.Fatalf("%v: it has %d", err, len(a.bodies()))
	}
	for body, n := range a.bodies() {
		if _, ok := want[body]; !ok || n != 1 {
			t.Fatalf("consumer a got %q %d times (acknowledged: %v)", body, n, ok)
		}
	}
	wantTagged := 0
	for _, tag := range want {
		if tag == "a" {
			wantTagged++
		}
	}
	if err := waitFor(ctx, "the tag-a consumer's messages", func() bool { return len(tagged.bodies()) >= wantTagged }); err != nil {
		t.Fatalf("%v: it has %d of %d", err, len(tagged.bodies()), wantTagged)
	}
	for _, d := range tagged.deliveries() {
		if want[d.body] != "a" || d.tag != "a" {
			t.Fatalf("the tag-a subscription got %q with tag %q (sent with %q)", d.body, d.tag, want[d.body])
		}
	}
	t.Logf("consumer a got each of %d messages once; the tag-a consumer got the %d tag-a ones", len(want), wantTagged)

	// A second and a third member join: send rounds until one round's
	// messages reach every member, from disjoint queues.
	members := []*pushRecorder{a}
	for _, name := range []string{"b", "c"} {
		members = append(members, startPush(t, ns, name, group, topic, "*", nil))
		settleRound(t, ctx, p, topic, "with-"+name, members, acked)
		for _, m := range members {
			t.Logf("with %s joined: %s holds queues %v", name, m.name, slices.Sorted(maps.Keys(queuesOf(m, "with-"+name))))
		}
	}
	if lost := undelivered(acked, members); len(lost) > 0 {
		t.Fatalf("%d acknowledged messages reached no member of the group, first %q", len(lost), lost[0])
	}

	// The group stops (committing its offsets) and one member comes back:
	// it starts every queue at the group's committed offset (members that
	// took a queue over while the others stopped may have committed an
	// older one: what lies after it comes again, as with RocketMQ) and gets
	// what was sent meanwhile.
	for _, m := range members {
		m.stop(t)
	}
	committed := map[int]int64{}
	for _, q := range describeGroup(t, ctx, c, group, topic).Queues {
		if q.Committed == nil {
			t.Fatalf("queue %d: nothing committed after the group consumed it", q.QueueID)
		}
		committed[int(q.QueueID)] = *q.Committed
	}
	sendMix(t, ctx, p, topic, "later", 500, acked)
	back := startPush(t, ns, "a-again", group, topic, "*", nil)
	if err := waitFor(ctx, "the restarted consumer's 500 messages", func() bool {
		n := 0
		for body := range back.bodies() {
			if strings.HasPrefix(body, "later-") {
				n++
			}
		}
		return n >= 500
	}); err != nil {
		t.Fatal(err)
	}
	again := 0
	for _, d := range back.deliveries() {
		if d.queueOffset < committed[d.queue] {
			t.Fatalf("the restarted consumer got %q at queue %d offset %d, before the group's committed offset %d", d.body, d.queue, d.queueOffset, committed[d.queue])
		}
		if !strings.HasPrefix(d.body, "later-") {
			again++
		}
	}
	t.Logf("%d messages acknowledged, every one consumed; the restarted member resumed at the committed offsets %v (%d consumed before came again)",
		len(acked.snapshot()), committed, again)

	if err := waitFor(ctx, "the 10 refused messages to come back", func() bool { return len(retrying.bodies()) >= 10 }); err != nil {
		t.Fatalf("%v: %d came back", err, len(retrying.bodies()))
	}
	for _, d := range retrying.deliveries() {
		retryMu.Lock()
		n := refused[d.body]
		retryMu.Unlock()
		if n != 1 || d.reconsume != 1 {
			t.Fatalf("message %q accepted with reconsume times %d after %d refusals, want 1 and 1", d.body, d.reconsume, n)
		}
	}
	t.Logf("10 messages answered RECONSUME_LATER came back once each through %%RETRY%%, reconsume times 1")
}

// TestRocketMQBothAPIs: messages sent over RocketMQ's protocol (Apache
// producer) and over raftmq's gRPC API (raftmq produce) to one topic read
// back identically through both: an Apache push consumer and raftmq
// consume see the same msgId, body, tag, keys, queue, queue offset, born
// and store timestamps for every message.
func TestRocketMQBothAPIs(t *testing.T) {
	c := rocketmqCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := nameServers(c)
	const topic = "e2e-both"
	p := rocketmqProducer(t, ns, "e2e-both-producer")
	sendMix(t, ctx, p, topic, "remoting", 100, &produced{tags: map[string]string{}})
	cli(t, ctx, c, "produce", "-t", topic, "-n", "100", "-s", "64", "--tag", "grpc-tag", "--key", "grpc-key")

	grpcView := map[string]consumedMessage{}
	for _, m := range jsonLines[consumedMessage](t, cli(t, ctx, c, "consume", "-t", topic, "--to-end", "--json")) {
		grpcView[m.MsgID] = m
	}
	if len(grpcView) != 200 {
		t.Fatalf("raftmq consume read %d distinct msgIds, want 200", len(grpcView))
	}
	r := startPush(t, ns, "both", "e2e-both-group", topic, "*", nil)
	if err := waitFor(ctx, "the push consumer's 200 messages", func() bool { return len(r.bodies()) >= 200 }); err != nil {
		t.Fatal(err)
	}
	for _, d := range r.deliveries() {
		g, ok := grpcView[d.msgID]
		if !ok {
			t.Fatalf("the push consumer got msgId %s (body %q), which raftmq consume did not", d.msgID, d.body)
		}
		if g.Body != d.body || g.Tags != d.tag || strings.Join(g.Keys, " ") != d.keys || int(g.QueueID) != d.queue ||
			g.QueueOffset != d.queueOffset || g.BornTimestamp != d.bornMS || g.StoreTimestamp != d.storeMS {
			t.Fatalf("msgId %s differs:\n gRPC:     body %q tags %q keys %v queue %d offset %d born %d store %d\n RocketMQ: body %q tag %q keys %q queue %d offset %d born %d store %d",
				d.msgID, g.Body, g.Tags, g.Keys, g.QueueID, g.QueueOffset, g.BornTimestamp, g.StoreTimestamp,
				d.body, d.tag, d.keys, d.queue, d.queueOffset, d.bornMS, d.storeMS)
		}
		delete(grpcView, d.msgID)
	}
	if len(grpcView) != 0 {
		t.Fatalf("%d messages raftmq consume read never reached the push consumer", len(grpcView))
	}
}

// rocketmqProduceUntil sends single messages named prefix-worker-i with SendSync
// from four workers until stop closes, adding each acknowledged body to
// acked; it returns how many sends failed (a failed send is not
// acknowledged: the client gave up on it).
func rocketmqProduceUntil(ctx context.Context, p rocketmq.Producer, topic, prefix string, acked *produced, stop <-chan struct{}) int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-ctx.Done():
					return
				default:
				}
				body := fmt.Sprintf("%s-%d-%d", prefix, w, i)
				sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				res, err := p.SendSync(sctx, primitive.NewMessage(topic, []byte(body)).WithKeys([]string{body}))
				cancel()
				if err == nil && res.Status == primitive.SendOK {
					acked.add(body, "")
					continue
				}
				mu.Lock()
				failed++
				mu.Unlock()
				select { // a dead leader refuses at once: pace the retries
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}()
	}
	wg.Wait()
	return failed
}

// count is how many acknowledged bodies start with prefix.
func (p *produced) count(prefix string) int {
	n := 0
	for body := range p.snapshot() {
		if strings.HasPrefix(body, prefix) {
			n++
		}
	}
	return n
}

// TestRocketMQLeaderKill: the leader is killed -9 while an Apache producer
// sends and two push consumers of one group consume. Clients learn the new
// leader at their next route refresh (every 30 s); until then sends fail
// and are retried by the application, and pulls go to the dead address. No
// acknowledged message is lost: every one reaches a member; and once the
// group's rebalance settles no message is delivered to both members.
func TestRocketMQLeaderKill(t *testing.T) {
	c := rocketmqCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ns := nameServers(c)
	const topic, group = "e2e-failover", "e2e-failover-group"
	p := rocketmqProducer(t, ns, "e2e-failover-producer")
	acked := &produced{tags: map[string]string{}}
	sendMix(t, ctx, p, topic, "before", 100, acked)
	members := []*pushRecorder{startPush(t, ns, "a", group, topic, "*", nil), startPush(t, ns, "b", group, topic, "*", nil)}

	stop := make(chan struct{})
	failedCh := make(chan int, 1)
	go func() { failedCh <- rocketmqProduceUntil(ctx, p, topic, "during", acked, stop) }()
	if err := waitFor(ctx, "500 sends before the kill", func() bool { return acked.count("during-") >= 500 }); err != nil {
		close(stop)
		t.Fatal(err)
	}
	li, err := c.Leader(ctx)
	if err != nil {
		close(stop)
		t.Fatal(err)
	}
	old := c.Nodes[li]
	if err := old.Kill(); err != nil || old.Running() {
		close(stop)
		t.Fatalf("kill -9 of the leader %s: %v (running: %v)", old.Spec().ID, err, old.Running())
	}
	before := acked.count("during-")
	killed := time.Now()
	t.Logf("killed the leader %s (pid gone) after %d acknowledged sends", old.Spec().ID, before)
	err = waitFor(ctx, "500 sends acknowledged after the kill", func() bool { return acked.count("during-") >= before+500 })
	close(stop)
	failed := <-failedCh
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sends resumed %v after the kill; %d sends failed meanwhile", time.Since(killed).Round(time.Second), failed)

	if err := waitFor(ctx, "every acknowledged message to reach a member", func() bool { return len(undelivered(acked, members)) == 0 }); err != nil {
		lost := undelivered(acked, members)
		t.Fatalf("%v: %d acknowledged messages reached no member, first %q", err, len(lost), lost[0])
	}
	dups := 0
	for _, m := range members {
		for _, n := range m.bodies() {
			dups += n - 1
		}
	}
	settleRound(t, ctx, p, topic, "after", members, acked)
	t.Logf("%d acknowledged messages all consumed (%d redelivered to the same member during the failover); the settled round went once to one member each", len(acked.snapshot()), dups)
}
