package store

import (
	"errors"
	"fmt"
	"math/rand"
	"strconv"
	"testing"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/meta"
	"github.com/raftmq/raftmq/vfs"
)

// timerStore is a store whose entries carry the store times a test picks:
// the fake clock of delayed delivery.
type timerStore struct {
	t   *testing.T
	s   *Store
	idx uint64
}

func (ts *timerStore) header(now int64) EntryHeader {
	ts.idx++
	return EntryHeader{RaftIndex: ts.idx, Term: 1, StoreTimestamp: now, StoreHost: message.HostPort{IP: [4]byte{127, 0, 0, 1}, Port: 7001}}
}

func (ts *timerStore) send(now int64, msgs ...message.Message) []PutResult {
	ts.t.Helper()
	res, err := ts.s.AppendMessages(ts.header(now), msgs, nil)
	if err != nil {
		ts.t.Fatalf("append: %v", err)
	}
	return append([]PutResult(nil), res...)
}

func (ts *timerStore) deliver(now int64) int {
	ts.t.Helper()
	n, err := ts.s.DeliverDue(ts.header(now))
	if err != nil {
		ts.t.Fatalf("deliver at %d: %v", now, err)
	}
	return n
}

// delayed is message n for topic "real" queue q with one delay property.
func delayed(t *testing.T, n int, q int32, key, value string) message.Message {
	t.Helper()
	props, err := message.EncodeProperties(
		message.Property{Key: message.PropertyUniqKey, Value: fmt.Sprintf("U%08d", n)},
		message.Property{Key: key, Value: value},
	)
	if err != nil {
		t.Fatal(err)
	}
	return message.Message{Topic: "real", QueueID: q, Body: fmt.Appendf(nil, "body-%d", n), Properties: props}
}

func realMessages(t *testing.T, s *Store, queues int32) map[string]Message {
	t.Helper()
	out := map[string]Message{}
	for q := range queues {
		r, err := s.GetMessages("real", q, 0, 10000, 1<<30, "")
		if err != nil && !errors.Is(err, ErrNoSuchTopic) {
			t.Fatalf("read real/%d: %v", q, err)
		}
		for _, m := range r.Messages {
			id, _ := m.Property(message.PropertyUniqKey)
			if _, dup := out[id]; dup {
				t.Fatalf("%s delivered twice", id)
			}
			out[id] = m
		}
	}
	return out
}

// TestDelayedDelivery walks one message per delay property through
// scheduling and delivery, and the refusals.
func TestDelayedDelivery(t *testing.T) {
	ts := &timerStore{t: t, s: mustOpen(t, vfs.NewMem(), smallConfig("/s"))}
	defer ts.s.Close()
	const t0 = int64(1_700_000_000_000)
	res := ts.send(t0,
		delayed(t, 1, 0, message.PropertyTimerDelayMs, "1500"),
		delayed(t, 2, 1, message.PropertyDelayLevel, "3"), // 10 s
		delayed(t, 3, 2, message.PropertyTimerDeliverMs, strconv.FormatInt(t0+4000, 10)),
		delayed(t, 4, 3, message.PropertyTimerDelaySec, "2"),
		delayed(t, 5, 0, message.PropertyDelayLevel, "0"),                             // no delay
		delayed(t, 6, 0, message.PropertyTimerDeliverMs, strconv.FormatInt(t0-1, 10)), // past: at once
		delayed(t, 7, 0, message.PropertyTimerDelaySec, strconv.FormatInt(ScheduleHorizon/1000+1, 10)),
		delayed(t, 8, 0, message.PropertyTimerDelayMs, "soon"),
	)
	for i, want := range []string{ScheduleTopic, ScheduleTopic, ScheduleTopic, ScheduleTopic, "real", "real"} {
		if res[i].Err != nil || res[i].Topic != want {
			t.Fatalf("message %d: %+v, want it in %s", i+1, res[i], want)
		}
	}
	for _, i := range []int{6, 7} {
		if !errors.Is(res[i].Err, ErrBadDelay) || KindOf(res[i].Err) != KindBadInput {
			t.Fatalf("message %d: %+v, want ErrBadDelay", i+1, res[i])
		}
	}
	if got := len(realMessages(t, ts.s, 4)); got != 2 {
		t.Fatalf("%d messages in the real topic before any is due, want the 2 undelayed", got)
	}
	if next, ok, err := ts.s.NextDue(); err != nil || !ok || next != t0+1500 {
		t.Fatalf("NextDue = %d %v %v, want %d", next, ok, err, t0+1500)
	}
	if p := ts.s.ScheduledPending(); p != 4 {
		t.Fatalf("%d pending, want 4", p)
	}
	if n := ts.deliver(t0 + 1499); n != 0 {
		t.Fatalf("delivered %d before anything was due", n)
	}
	if n := ts.deliver(t0 + 2000); n != 2 { // 1.5 s and 2 s
		t.Fatalf("delivered %d at +2 s, want 2", n)
	}
	if n := ts.deliver(t0 + 2000); n != 0 {
		t.Fatalf("delivered %d again", n)
	}
	got := realMessages(t, ts.s, 4)
	m, ok := got["U00000004"]
	if !ok || m.QueueID != 3 || string(m.Body) != "body-4" {
		t.Fatalf("delivered copy: %+v", m)
	}
	if v, _ := m.Property(message.PropertyTimerDelivered); v != strconv.FormatInt(t0+2000, 10) {
		t.Fatalf("TIMER_DELIVERED %q", v)
	}
	for _, k := range []string{message.PropertyRealTopic, message.PropertyRealQueueID, message.PropertyTimerOutMs} {
		if _, ok := m.Property(k); ok {
			t.Fatalf("the delivered copy still carries %s", k)
		}
	}
	// Due at or before what was delivered: stored in its topic at once.
	late := ts.send(t0+1000, delayed(t, 9, 0, message.PropertyTimerDeliverMs, strconv.FormatInt(t0+1999, 10)))
	if late[0].Topic != "real" {
		t.Fatalf("a message due before the delivered time went to %s", late[0].Topic)
	}
	if n := ts.deliver(t0 + 20_000); n != 2 {
		t.Fatalf("delivered %d at +20 s, want the last 2", n)
	}
	if got := len(realMessages(t, ts.s, 4)); got != 7 {
		t.Fatalf("%d messages in the real topic, want 7", got)
	}
	if _, ok, _ := ts.s.NextDue(); ok {
		t.Fatal("a message is still pending")
	}
	if p := ts.s.ScheduledPending(); p != 0 {
		t.Fatalf("%d pending at the end", p)
	}
	if st := ts.s.Stats(); st.Delivered != 4 {
		t.Fatalf("Stats.Delivered %d, want 4", st.Delivered)
	}
	// A client's TIMER_DELIVERED is dropped (only deliveries carry it: a
	// consumed copy sent on is a new message); the schedule topic is
	// refused.
	forged := delayed(t, 10, 0, message.PropertyTimerDelivered, "1")
	sched := delayed(t, 11, 0, "K", "v")
	sched.Topic = ScheduleTopic
	bad := ts.send(t0+30_000, forged, sched)
	if bad[0].Err != nil || !errors.Is(bad[1].Err, ErrBadTopic) {
		t.Fatalf("reserved: %+v", bad)
	}
	if got, err := ts.s.LookupByOffset(bad[0].PhysicalOffset); err != nil {
		t.Fatal(err)
	} else if _, marked := got.Property(message.PropertyTimerDelivered); marked {
		t.Fatalf("a client's %s was stored", message.PropertyTimerDelivered)
	}
	if p := ts.s.ScheduledPending(); p != 0 {
		t.Fatalf("a client's mark counted as a delivery: %d pending", p)
	}
	// The leader refuses before proposing too, and a delay that does not
	// parse.
	notNumber := delayed(t, 12, 0, message.PropertyDelayLevel, "one")
	for _, m := range []message.Message{sched, notNumber} {
		if err := ts.s.ValidateMessage(&m); KindOf(err) != KindBadInput {
			t.Fatalf("ValidateMessage(%s %q) = %v, want bad input", m.Topic, m.Properties, err)
		}
	}
	// Its queues are the store's: no admin command touches the topic.
	for _, err := range []error{
		ts.s.CreateTopic(ts.header(t0+40_000), TopicConfig{Name: ScheduleTopic, Queues: 8}),
		ts.s.UpdateTopic(ts.header(t0+40_000), TopicConfig{Name: ScheduleTopic, Queues: 8}),
		ts.s.DeleteTopic(ts.header(t0+40_000), ScheduleTopic),
	} {
		if !errors.Is(err, ErrBadTopic) {
			t.Fatalf("admin command on the schedule topic: %v", err)
		}
	}
}

// TestDelayedDeliveryModel: random delayed messages (mostly hours, some up
// to the 40-day horizon) over 2,500 hours of store time with jumps of days
// (every hour bucket in play, and reused), random delivery ticks and
// crashes (the reopened store rebuilds its timer from the records above
// the checkpoint) — every message is delivered exactly once, never before
// it is due, and by the first tick at or after its due time; the live and
// the replayed meta encode alike.
func TestDelayedDeliveryModel(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	fsys := vfs.NewMem()
	cfg := smallConfig("/s")
	cfg.CommitLogFileSize = 1 << 20
	ts := &timerStore{t: t, s: mustOpen(t, fsys, cfg)}
	now := int64(1_700_000_000_000)
	hours := int64(2500) // past 1,024: buckets are reused
	if raceBuild {
		hours = 1100 // the race detector checks concurrency, not coverage
	}
	end := now + hours*meta.ScheduleBucketMs
	dueOf := map[string]int64{}
	pending := map[string]int64{}
	delivered := map[string]bool{}
	var next [4]int64 // per queue of the real topic: the next offset to read
	collect := func() {
		for q := range int32(4) {
			r, err := ts.s.GetMessages("real", q, next[q], 10000, 1<<30, "")
			if err != nil && !errors.Is(err, ErrNoSuchTopic) {
				t.Fatalf("seed %d: read real/%d: %v", seed, q, err)
			}
			for _, m := range r.Messages {
				id, _ := m.Property(message.PropertyUniqKey)
				if delivered[id] {
					t.Fatalf("seed %d: %s delivered twice", seed, id)
				}
				if m.StoreTimestamp < dueOf[id] {
					t.Fatalf("seed %d: %s delivered at %d, due %d", seed, id, m.StoreTimestamp, dueOf[id])
				}
				delivered[id] = true
				delete(pending, id)
				next[q] = m.QueueOffset + 1
			}
		}
	}
	n := 0
	for now < end {
		now += int64(rng.Intn(40 * 60 * 1000))
		if rng.Intn(100) == 0 {
			now += int64(rng.Intn(100)) * meta.ScheduleBucketMs // days without a tick
		}
		switch op := rng.Intn(250); {
		case op < 125: // send a few
			var msgs []message.Message
			for k := rng.Intn(5) + 1; k > 0; k-- {
				n++
				delay := int64(rng.Intn(int(6 * meta.ScheduleBucketMs)))
				if rng.Intn(20) == 0 {
					delay = rng.Int63n(ScheduleHorizon + 1)
				}
				msgs = append(msgs, delayed(t, n, int32(rng.Intn(4)), message.PropertyTimerDelayMs, strconv.FormatInt(delay, 10)))
				id := fmt.Sprintf("U%08d", n)
				dueOf[id], pending[id] = now+delay, now+delay
			}
			ts.send(now, msgs...)
		case op == 125: // a crash: the reopened store must agree with the live one
			ts.s.mu.RLock()
			live := string(ts.s.meta.Encode())
			ts.s.mu.RUnlock()
			crashed := crashImage(t, ts.s, fsys)
			_ = ts.s.Close()
			fsys = crashed
			ts.s = mustOpen(t, fsys, cfg)
			ts.s.mu.RLock()
			replayed := string(ts.s.meta.Encode())
			ts.s.mu.RUnlock()
			if live != replayed {
				t.Fatalf("seed %d: meta after the crash differs from the live one", seed)
			}
			if rng.Intn(2) == 0 {
				if err := ts.s.Flush(); err != nil {
					t.Fatal(err)
				}
			}
		default: // a delivery tick (more than a batch due is delivered over several)
			for ts.deliver(now) == deliverBatch {
			}
			collect()
			for id, due := range pending {
				if due <= now {
					t.Fatalf("seed %d: %s due %d not delivered by the tick at %d", seed, id, due, now)
				}
			}
		}
	}
	for ts.deliver(end+ScheduleHorizon+1) == deliverBatch {
	}
	collect()
	if len(pending) != 0 || len(delivered) != len(dueOf) {
		t.Fatalf("seed %d: %d delivered of %d", seed, len(delivered), len(dueOf))
	}
	if _, ok, _ := ts.s.NextDue(); ok || ts.s.ScheduledPending() != 0 {
		t.Fatalf("seed %d: still pending after everything was due (%d)", seed, ts.s.ScheduledPending())
	}
	t.Logf("%d messages delayed and delivered over %d hours", len(dueOf), (end-1_700_000_000_000)/meta.ScheduleBucketMs)
	_ = ts.s.Close()
}
