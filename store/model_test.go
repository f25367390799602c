package store

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/verify"
	"github.com/raftmq/raftmq/vfs"
)

// The model test runs random operation sequences against a store and a
// plain in-memory model and checks after every step that they agree.

type mdlMsg struct {
	topic string
	queue int32
	qoff  int64
	phy   int64
	body  []byte
	tag   string
	keys  []string
	uniq  string
}

type mdlQKey struct {
	topic string
	queue int32
}

type storeModel struct {
	topics  map[string]int32
	queues  map[mdlQKey][]*mdlMsg
	offsets map[string]int64 // group/topic/queue
	all     []*mdlMsg        // every message ever stored (the index keeps deleted topics' keys)
}

var mdlTopics = []string{"t0", "t1", "t2"}

func mdlMessage(rng *rand.Rand, n int) (message.Message, string, []string) {
	topic := mdlTopics[rng.Intn(len(mdlTopics))]
	switch rng.Intn(12) {
	case 0:
		topic = "bad topic"
	case 1:
		topic = ""
	}
	queue := int32(rng.Intn(4))
	if rng.Intn(15) == 0 {
		queue = int32([]int{-1, 8, 2000}[rng.Intn(3)])
	}
	body := make([]byte, rng.Intn(300))
	rng.Read(body)
	if rng.Intn(20) == 0 {
		body = make([]byte, 8<<10+1) // over smallConfig's MaxMessageSize
	}
	tag := []string{"", "red", "blue", "green"}[rng.Intn(4)]
	keys := []string{fmt.Sprintf("k%d", rng.Intn(20))}
	if rng.Intn(2) == 0 {
		keys = append(keys, fmt.Sprintf("x%d", rng.Intn(20)))
	}
	props := []message.Property{{Key: message.PropertyUniqKey, Value: fmt.Sprintf("U%06d", n)}}
	props = append(props, message.Property{Key: message.PropertyKeys, Value: strings.Join(keys, " ")})
	if tag != "" {
		props = append(props, message.Property{Key: message.PropertyTags, Value: tag})
	}
	p, err := message.EncodeProperties(props...)
	if err != nil {
		panic(err)
	}
	return message.Message{Topic: topic, QueueID: queue, BornTimestamp: int64(n), Body: body, Properties: p}, tag, keys
}

// accepts says whether the store must take m given the model's topics.
func (md *storeModel) accepts(m *message.Message) bool {
	if len(m.Body) > 8<<10 || ValidateTopicName(m.Topic) != nil || m.QueueID < 0 {
		return false
	}
	if q, ok := md.topics[m.Topic]; ok {
		return m.QueueID < q
	}
	return m.QueueID < 8 // auto-created with DefaultQueues
}

type modelRun struct {
	t     *testing.T
	rng   *rand.Rand
	fsys  *vfs.MemFS
	cfg   Config
	s     *Store
	md    *storeModel
	index uint64
	n     int
}

func (r *modelRun) next() EntryHeader { r.index++; return header(r.index) }

func (r *modelRun) opAppend() {
	k := 1 + r.rng.Intn(4)
	msgs := make([]message.Message, k)
	tags := make([]string, k)
	keys := make([][]string, k)
	for i := range msgs {
		r.n++
		msgs[i], tags[i], keys[i] = mdlMessage(r.rng, r.n)
	}
	res, err := r.s.AppendMessages(r.next(), msgs, nil)
	if err != nil {
		r.t.Fatalf("append: %v", err)
	}
	for i := range msgs {
		m := &msgs[i]
		want := r.md.accepts(m)
		if (res[i].Err == nil) != want {
			r.t.Fatalf("message %d (%q/%d, %d bytes): err %v, model accepts %v", i, m.Topic, m.QueueID, len(m.Body), res[i].Err, want)
		}
		if !want {
			continue
		}
		if _, ok := r.md.topics[m.Topic]; !ok {
			r.md.topics[m.Topic] = 8
		}
		qk := mdlQKey{m.Topic, m.QueueID}
		mm := &mdlMsg{topic: m.Topic, queue: m.QueueID, qoff: int64(len(r.md.queues[qk])), phy: res[i].PhysicalOffset,
			body: m.Body, tag: tags[i], keys: keys[i], uniq: fmt.Sprintf("U%06d", r.n-k+1+i)}
		if res[i].QueueOffset != mm.qoff || res[i].MsgID != mm.uniq {
			r.t.Fatalf("put result %+v, model offset %d id %s", res[i], mm.qoff, mm.uniq)
		}
		r.md.queues[qk] = append(r.md.queues[qk], mm)
		r.md.all = append(r.md.all, mm)
	}
}

func (r *modelRun) opCreate() {
	name := mdlTopics[r.rng.Intn(len(mdlTopics))]
	if r.rng.Intn(8) == 0 {
		name = "no/slash"
	}
	queues := int32(1 + r.rng.Intn(6))
	if r.rng.Intn(8) == 0 {
		queues = 0
	}
	h := r.next()
	err := r.s.CreateTopic(h, TopicConfig{Name: name, Queues: queues})
	_, exists := r.md.topics[name]
	var want error
	switch {
	case ValidateTopicName(name) != nil:
		want = ErrBadTopic
	case queues == 0:
		want = ErrBadQueue
	case exists:
		want = ErrTopicExists
	}
	r.expect("create "+name, err, want)
	if want == nil {
		r.md.topics[name] = queues
	} else {
		r.markApplied(h)
	}
}

func (r *modelRun) opDelete() {
	name := mdlTopics[r.rng.Intn(len(mdlTopics))]
	h := r.next()
	err := r.s.DeleteTopic(h, name)
	if _, ok := r.md.topics[name]; !ok {
		r.expect("delete "+name, err, ErrNoSuchTopic)
		r.markApplied(h)
		return
	}
	r.expect("delete "+name, err, nil)
	delete(r.md.topics, name)
	for k := range r.md.queues {
		if k.topic == name {
			delete(r.md.queues, k)
		}
	}
	for k := range r.md.offsets {
		if bytes.HasPrefix([]byte(k), []byte("g/"+name+"/")) {
			delete(r.md.offsets, k)
		}
	}
}

func (r *modelRun) opCommit() {
	c := OffsetCommit{Group: "g", Topic: mdlTopics[r.rng.Intn(len(mdlTopics))], QueueID: int32(r.rng.Intn(5)), Offset: int64(r.rng.Intn(50))}
	if r.rng.Intn(10) == 0 {
		c.Offset = -1
	}
	h := r.next()
	err := r.s.CommitOffsets(h, []OffsetCommit{c})
	q, ok := r.md.topics[c.Topic]
	var want error
	switch {
	case !ok:
		want = ErrNoSuchTopic
	case c.QueueID >= q:
		want = ErrBadQueue
	case c.Offset < 0:
		want = ErrBadOffset
	}
	r.expect("commit", err, want)
	if want == nil {
		r.md.offsets[fmt.Sprintf("g/%s/%d", c.Topic, c.QueueID)] = c.Offset
	} else {
		r.markApplied(h)
	}
}

func (r *modelRun) expect(what string, err, want error) {
	r.t.Helper()
	if (want == nil) != (err == nil) || (want != nil && !errors.Is(err, want)) {
		r.t.Fatalf("%s: err %v, want %v", what, err, want)
	}
}

func (r *modelRun) markApplied(h EntryHeader) {
	if err := r.s.MarkApplied(h); err != nil {
		r.t.Fatalf("mark applied: %v", err)
	}
}

func (r *modelRun) opGet() {
	topic := mdlTopics[r.rng.Intn(len(mdlTopics))]
	queue := int32(r.rng.Intn(5))
	msgs := r.md.queues[mdlQKey{topic, queue}]
	offset := int64(r.rng.Intn(len(msgs)+3)) - 1
	maxNum := 1 + r.rng.Intn(40)
	tag := []string{"", "*", "red", "blue", "red||green"}[r.rng.Intn(5)]
	got, err := r.s.GetMessages(topic, queue, offset, maxNum, 0, tag)
	if err != nil {
		r.t.Fatalf("get: %v", err)
	}
	want := r.md.get(topic, queue, offset, maxNum, tag)
	if got.Status != want.Status || got.NextOffset != want.NextOffset || got.MinOffset != want.MinOffset ||
		got.MaxOffset != want.MaxOffset || len(got.Messages) != len(want.Messages) {
		r.t.Fatalf("get %s/%d@%d max %d tag %q: %v next %d min %d max %d n %d; model %v next %d min %d max %d n %d",
			topic, queue, offset, maxNum, tag, got.Status, got.NextOffset, got.MinOffset, got.MaxOffset, len(got.Messages),
			want.Status, want.NextOffset, want.MinOffset, want.MaxOffset, len(want.Messages))
	}
	for i, m := range got.Messages {
		w := want.Messages[i]
		if m.QueueOffset != w.QueueOffset || m.PhysicalOffset != w.PhysicalOffset || !bytes.Equal(m.Body, w.Body) {
			r.t.Fatalf("get message %d: offset %d phy %d; model %d phy %d", i, m.QueueOffset, m.PhysicalOffset, w.QueueOffset, w.PhysicalOffset)
		}
	}
}

func tagMatches(expr, tag string) bool {
	switch expr {
	case "", "*":
		return true
	case "red||green":
		return tag == "red" || tag == "green"
	}
	return tag == expr
}

// get is RocketMQ's getMessage over the model (no retention, so min is 0).
func (md *storeModel) get(topic string, queue int32, offset int64, maxNum int, tag string) GetResult {
	q, ok := md.topics[topic]
	if !ok || queue >= q {
		return GetResult{Status: NoMatchedLogicQueue}
	}
	msgs := md.queues[mdlQKey{topic, queue}]
	max := int64(len(msgs))
	res := GetResult{MaxOffset: max}
	switch {
	case max == 0:
		return GetResult{Status: NoMessageInQueue}
	case offset < 0:
		res.Status, res.NextOffset = OffsetTooSmall, 0
		return res
	case offset == max:
		res.Status, res.NextOffset = OffsetOverflowOne, offset
		return res
	case offset > max:
		res.Status, res.NextOffset = OffsetOverflowBadly, max
		return res
	}
	end := min(offset+int64(min(maxNum*4, 1024)), max)
	next := offset
	for _, m := range msgs[offset:end] {
		if len(res.Messages) >= maxNum {
			break
		}
		next++
		if tagMatches(tag, m.tag) {
			res.Messages = append(res.Messages, Message{QueueOffset: m.qoff, PhysicalOffset: m.phy, Body: m.body})
		}
	}
	res.NextOffset, res.Status = next, Found
	if len(res.Messages) == 0 {
		res.Status = NoMatchedMessage
	}
	return res
}

func (r *modelRun) opQuery() {
	topic := mdlTopics[r.rng.Intn(len(mdlTopics))]
	key := fmt.Sprintf("%s%d", []string{"k", "x"}[r.rng.Intn(2)], r.rng.Intn(20))
	got, err := r.s.QueryByKey(topic, key, 64, 0, 1<<62)
	if err != nil {
		r.t.Fatalf("query: %v", err)
	}
	var want []int64
	for _, m := range r.md.all {
		for _, k := range m.keys {
			if m.topic == topic && k == key {
				want = append(want, m.phy)
			}
		}
	}
	sort.Slice(want, func(i, j int) bool { return want[i] > want[j] })
	want = want[:min(len(want), 64)]
	if len(got) != len(want) {
		r.t.Fatalf("query %s %s: %d results, model %d", topic, key, len(got), len(want))
	}
	for i := range got {
		if got[i].PhysicalOffset != want[i] {
			r.t.Fatalf("query %s %s result %d at %d, model %d", topic, key, i, got[i].PhysicalOffset, want[i])
		}
	}
}

func (r *modelRun) opLookup() {
	if len(r.md.all) == 0 {
		return
	}
	m := r.md.all[r.rng.Intn(len(r.md.all))]
	got, err := r.s.LookupByMsgID(m.topic, m.uniq)
	if err != nil || len(got) != 1 || got[0].PhysicalOffset != m.phy {
		r.t.Fatalf("lookup %s: %v %d results", m.uniq, err, len(got))
	}
	id := message.OffsetMsgID(header(1).StoreHost, m.phy)
	got, err = r.s.LookupByMsgID("", id)
	if err != nil || len(got) != 1 || !bytes.Equal(got[0].Body, m.body) {
		r.t.Fatalf("lookup by offset id %s: %v %d results", id, err, len(got))
	}
}

// check compares topics, queue max offsets, consumer offsets and the applied index.
func (r *modelRun) check() {
	r.t.Helper()
	topics := r.s.Topics()
	if len(topics) != len(r.md.topics) {
		r.t.Fatalf("%d topics, model %d", len(topics), len(r.md.topics))
	}
	for _, tc := range topics {
		if q, ok := r.md.topics[tc.Name]; !ok || q != tc.Queues {
			r.t.Fatalf("topic %+v, model %d %v", tc, q, ok)
		}
		for qid := int32(0); qid < tc.Queues; qid++ {
			if max, err := r.s.MaxOffset(tc.Name, qid); err != nil || max != int64(len(r.md.queues[mdlQKey{tc.Name, qid}])) {
				r.t.Fatalf("%s/%d max %d (%v), model %d", tc.Name, qid, max, err, len(r.md.queues[mdlQKey{tc.Name, qid}]))
			}
			off, ok := r.s.ConsumerOffset("g", tc.Name, qid)
			want, wok := r.md.offsets[fmt.Sprintf("g/%s/%d", tc.Name, qid)]
			if ok != wok || off != want {
				r.t.Fatalf("consumer offset %s/%d: %d %v, model %d %v", tc.Name, qid, off, ok, want, wok)
			}
		}
	}
	if idx, _ := r.s.Applied(); idx != r.index {
		r.t.Fatalf("applied %d, model %d", idx, r.index)
	}
}

func (r *modelRun) reopen() {
	if err := r.s.Close(); err != nil {
		r.t.Fatalf("close: %v", err)
	}
	r.s = mustOpen(r.t, r.fsys, r.cfg)
	if mode := r.s.RecoveryPlan().Mode.String(); mode != "normal" {
		r.t.Fatalf("mode %s after a clean close", mode)
	}
}

func TestStoreAgainstModel(t *testing.T) {
	seed := testSeed(t)
	steps := 3000
	if testing.Short() {
		steps = 200
	}
	rng := rand.New(rand.NewSource(seed))
	r := &modelRun{t: t, rng: rng, fsys: vfs.NewMem(), cfg: smallConfig("/m/store"),
		md: &storeModel{topics: map[string]int32{}, queues: map[mdlQKey][]*mdlMsg{}, offsets: map[string]int64{}}}
	r.s = mustOpen(t, r.fsys, r.cfg)
	defer func() { r.s.Close() }()
	ops := []struct {
		weight int
		name   string
		fn     func()
	}{
		{30, "append", r.opAppend}, {4, "create", r.opCreate}, {2, "delete", r.opDelete}, {5, "commit", r.opCommit},
		{20, "get", r.opGet}, {6, "query", r.opQuery}, {5, "lookup", r.opLookup}, {3, "flush", func() {
			if err := r.s.Flush(); err != nil {
				t.Fatalf("flush: %v", err)
			}
		}}, {2, "reopen", r.reopen},
	}
	total := 0
	for _, o := range ops {
		total += o.weight
	}
	for step := 0; step < steps; step++ {
		x := rng.Intn(total)
		for _, o := range ops {
			if x -= o.weight; x < 0 {
				o.fn()
				break
			}
		}
		r.check()
	}
	r.reopen()
	r.check()
	if err := r.s.Close(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := verify.Stores(r.fsys, []string{"/m"}, &out); err != nil {
		t.Fatalf("verify after the run: %v\n%s", err, out.String())
	}
	r.s = mustOpen(t, r.fsys, r.cfg)
	t.Logf("%d steps, %d messages stored, raft index %d", steps, len(r.md.all), r.index)
}
