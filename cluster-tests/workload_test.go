package clustertest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/raftmq/raftmq/client"
)

const (
	topic      = "chaos"
	queues     = 4
	producers  = 3
	group      = "cg"
	sendPeriod = 15 * time.Millisecond // per producer: a rate, not a wait for a condition
)

var chaosMaxBatch = flag.Int("chaos.maxbatch", 4, "most messages per producer send (each send carries 1..maxbatch); raise it for long runs that must acknowledge millions")

// sent is one message a producer tried to store.
type sent struct {
	id       string
	producer int
	seq      int // order of sending within the producer
	body     []byte
	outcome  outcome
	queue    int32 // acked only
	offset   int64 // acked only
}

type outcome int

const (
	acked   outcome = iota
	unknown         // ErrOutcomeUnknown even after resending: stored at most once, and a problem (Unresolved)
	failed          // any other error: the client says nothing was applied
)

// seen is one message a consumer read.
type seen struct {
	id     string
	queue  int32
	offset int64
}

// workload drives producers, consumers and a committing consumer group
// against a cluster and records everything it was told.
type workload struct {
	tc   *testCluster
	seed int64

	mu          sync.Mutex
	sends       []*sent
	reads       []seen
	readGaps    []string
	committed   [queues]int64 // highest acknowledged commit per queue
	commits     int
	regressions []string // committed offsets read back lower than acknowledged
	failedWhy   []string // the first few errors of failed sends, for the log
	resent      int      // batches sent again after an unknown outcome
	producers   []*client.Client

	stop chan struct{}
	wg   sync.WaitGroup
	cls  []*client.Client
}

func startWorkload(ctx context.Context, tc *testCluster, seed int64) (*workload, error) {
	w := &workload{tc: tc, seed: seed, stop: make(chan struct{})}
	admin, err := w.client(ctx, 0, false)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	err = admin.CreateTopic(cctx, topic, queues)
	cancel()
	if err != nil && !errors.Is(err, client.ErrAlreadyExists) {
		w.close()
		return nil, fmt.Errorf("create topic: %w", err)
	}
	for p := 0; p < producers; p++ {
		cl, err := w.client(ctx, p, false)
		if err != nil {
			w.close()
			return nil, err
		}
		w.producers = append(w.producers, cl)
		w.wg.Add(1)
		go w.produce(cl, p)
	}
	for q := int32(0); q < queues; q++ {
		cl, err := w.client(ctx, int(q), true) // follower reads, committed data only
		if err != nil {
			w.close()
			return nil, err
		}
		w.wg.Add(1)
		go w.consume(cl, q)
	}
	cl, err := w.client(ctx, 1, false)
	if err != nil {
		w.close()
		return nil, err
	}
	w.wg.Add(1)
	go w.commitLoop(cl)
	return w, nil
}

func (w *workload) client(ctx context.Context, first int, readAny bool) (*client.Client, error) {
	cl, err := w.tc.newClient(ctx, first, readAny)
	if err != nil {
		return nil, err
	}
	w.cls = append(w.cls, cl)
	return cl, nil
}

// stopAndWait stops every goroutine and closes the clients.
func (w *workload) close() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.wg.Wait()
	for _, cl := range w.cls {
		_ = cl.Close()
	}
	w.cls = nil
}

// stopped waits d or until the workload stops; false once stopped.
func (w *workload) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-w.stop:
		return false
	case <-t.C:
		return true
	}
}

// opCtx is a context for one operation, cancelled when the workload stops.
func (w *workload) opCtx(d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	go func() {
		select {
		case <-w.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

func (w *workload) produce(cl *client.Client, p int) {
	defer w.wg.Done()
	rng := rand.New(rand.NewPCG(uint64(w.seed), uint64(p)))
	seq := 0
	for w.wait(sendPeriod) {
		n := 1 + rng.IntN(*chaosMaxBatch)
		msgs := make([]client.Message, n)
		recs := make([]*sent, n)
		for i := range msgs {
			id := cl.NewMsgID()
			body := fmt.Appendf(nil, "p%d-s%d-%s-", p, seq, id)
			for k := rng.IntN(600); k > 0; k-- {
				body = append(body, byte('a'+rng.IntN(26)))
			}
			msgs[i] = client.NewMessage(topic, body).WithID(id).WithKeys(id)
			recs[i] = &sent{id: id, producer: p, seq: seq, body: body}
			seq++
		}
		res, err := w.sendOnce(cl, cl.Prepare(msgs...))
		for i, r := range recs {
			switch {
			case err == nil && res[i].Err == nil:
				r.outcome, r.queue, r.offset = acked, res[i].QueueID, res[i].QueueOffset
			case err == nil || client.IsOutcomeUnknown(err):
				r.outcome = unknown // a per-message refusal is also checked as "at most once"
			default:
				r.outcome = failed
			}
		}
		w.mu.Lock()
		w.sends = append(w.sends, recs...)
		if len(recs) > 0 && recs[0].outcome == failed && len(w.failedWhy) < 5 {
			w.failedWhy = append(w.failedWhy, fmt.Sprintf("%s producer %d: %v", time.Now().Format("15:04:05.000"), p, err))
		}
		w.mu.Unlock()
	}
}

// drainTime bounds how long a producer keeps resending a batch whose
// outcome is unknown after the workload stopped (the cluster serves then:
// every fault ended with waitServing).
const drainTime = 60 * time.Second

// sendOnce sends a prepared batch (ids and producer sequences fixed) until
// its outcome is known: the producer is idempotent, so a batch whose
// outcome was unknown is sent again and the cluster stores it once. It
// gives up as unknown when the workload has stopped and drainTime passed
// since; a batch refused as not applied before any unknown outcome failed.
func (w *workload) sendOnce(cl *client.Client, msgs []client.Message) ([]client.SendResult, error) {
	uncertain := false
	var giveUp time.Time
	for {
		var ctx context.Context
		var cancel context.CancelFunc
		if !w.isStopped() {
			ctx, cancel = w.opCtx(5 * time.Second)
		} else {
			if giveUp.IsZero() {
				giveUp = time.Now().Add(drainTime)
			}
			ctx, cancel = context.WithDeadline(context.Background(), giveUp)
		}
		res, err := cl.Send(ctx, msgs...)
		cancel()
		switch {
		case err == nil:
			return res, nil
		case !client.IsOutcomeUnknown(err) && ctx.Err() == nil && !uncertain:
			return nil, err // nothing was applied
		}
		uncertain = uncertain || client.IsOutcomeUnknown(err) || ctx.Err() != nil
		w.mu.Lock()
		w.resent++
		w.mu.Unlock()
		if !giveUp.IsZero() && time.Now().After(giveUp) {
			return nil, fmt.Errorf("%w: still unknown %v after the workload stopped: %w", client.ErrOutcomeUnknown, drainTime, err)
		}
		if w.isStopped() {
			time.Sleep(100 * time.Millisecond) // backoff between resends; bounded by giveUp
		} else {
			w.wait(100 * time.Millisecond)
		}
	}
}

// clientResends is how often the producers' clients sent a send again
// after an unknown outcome (inside Send, before the workload saw it).
func (w *workload) clientResends() int64 {
	var n uint64
	for _, cl := range w.producers {
		n += cl.Stats().Resent
	}
	return int64(n)
}

func (w *workload) isStopped() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

// consume long-polls queue q from offset 0 and records what it reads.
func (w *workload) consume(cl *client.Client, q int32) {
	defer w.wg.Done()
	next := int64(0)
	for !w.isStopped() {
		ctx, cancel := w.opCtx(5 * time.Second)
		res, err := cl.Pull(ctx, client.PullRequest{Topic: topic, QueueID: q, Offset: next, MaxMessages: 64, MaxWait: time.Second})
		cancel()
		if err != nil {
			w.wait(100 * time.Millisecond) // backoff after an error
			continue
		}
		w.mu.Lock()
		for _, m := range res.Messages {
			if m.QueueOffset != next {
				w.readGaps = append(w.readGaps, fmt.Sprintf("queue %d: consumer expected offset %d, got %d", q, next, m.QueueOffset))
			}
			w.reads = append(w.reads, seen{id: m.MsgID, queue: q, offset: m.QueueOffset})
			next = m.QueueOffset + 1
		}
		w.mu.Unlock()
		if len(res.Messages) == 0 && res.NextOffset > next {
			next = res.NextOffset
		}
	}
}

// commitLoop is a consumer group member: per queue it reads back the
// committed offset (as a restarting consumer would), pulls from there and
// commits the next offset. The read-back must never be below an offset
// whose commit was acknowledged.
func (w *workload) commitLoop(cl *client.Client) {
	defer w.wg.Done()
	for round := 0; w.wait(50 * time.Millisecond); round++ {
		q := int32(round % queues)
		ctx, cancel := w.opCtx(5 * time.Second)
		w.commitOnce(ctx, cl, q)
		cancel()
	}
}

func (w *workload) commitOnce(ctx context.Context, cl *client.Client, q int32) {
	w.mu.Lock()
	floor := w.committed[q]
	w.mu.Unlock()
	off, _, err := cl.QueryOffset(ctx, group, topic, q)
	if err != nil {
		return
	}
	if off < floor {
		w.mu.Lock()
		w.regressions = append(w.regressions, fmt.Sprintf("%s queue %d: committed offset read back as %d after %d was acknowledged",
			time.Now().Format("15:04:05.000"), q, off, floor))
		w.mu.Unlock()
		off = floor
	}
	res, err := cl.Pull(ctx, client.PullRequest{Topic: topic, QueueID: q, Offset: off, MaxMessages: 16})
	if err != nil || len(res.Messages) == 0 {
		return
	}
	next := res.Messages[len(res.Messages)-1].QueueOffset + 1
	if err := cl.CommitOffset(ctx, group, topic, q, next); err != nil {
		return
	}
	w.mu.Lock()
	w.committed[q] = max(w.committed[q], next)
	w.commits++
	w.mu.Unlock()
}
