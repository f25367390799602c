package node

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/fsm"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/transport"
)

// Request states: a waiter that gives up can only withdraw a request the
// batcher has not proposed yet; otherwise the outcome is unknown.
const (
	reqPending int32 = iota
	reqProposed
	reqAbandoned
)

type sendReq struct {
	msgs   []message.Message
	bytes  int
	queued time.Time // when Send handed it over
	state  atomic.Int32
	done   chan sendResult // buffered 1; nil on the idle fast path
	group  *sendGroup      // the Send this request is a part of; nil if not split
}

// sendGroup links the parts of one Send that split cut across entries.
// Once a part failed, the parts not proposed yet are dropped (answered
// with errPartDropped, nothing stored) instead of being stored after the
// gap.
type sendGroup struct{ failed atomic.Bool }

type sendResult struct {
	results []store.PutResult
	err     error
}

// batcher is the leader's group commit: concurrent Sends become one
// MessageBatch entry, bounded by GroupCommit.MaxBytes and MaxMessages.
//
// It is adaptive, with no timer on the hot path. A lone Send on an idle
// leader (nothing queued, nothing in Raft) is proposed at once on the
// caller's goroutine. Otherwise Sends wait in one bounded queue, and the
// batcher goroutine takes all that waits (up to the entry bounds) at once,
// with up to GroupCommit.MaxInFlight entries in Raft:
//   - with no entry in Raft, whatever waits is proposed at once;
//   - a full entry is proposed as soon as a slot is free;
//   - a partial entry is proposed while others are in Raft only once it
//     holds at least half the messages of the entry that returned last:
//     the Sends that entry answered come back as the next ones. Otherwise
//     the first of them would take the free slot alone, and entries would
//     shrink to whatever arrived in one apply time (and a small entry in
//     flight would keep the next one small).
//
// Under load entries therefore settle near (Sends outstanding) /
// MaxInFlight, up to the bounds; Raft replicates everything proposed while
// an AppendEntries is out in the next one, so fewer, larger entries cost no
// replication parallelism.
//
// No entry exceeds GroupCommit.MaxBytes by more than one message: a Send
// larger than that is split into parts of at most MaxBytes (a message
// larger than MaxBytes is a part of its own), queued together in order and
// proposed as consecutive entries, and its results are put back together
// in the order of the request (see split and sendSplit).
//
// The queue is bounded by GroupCommit.MaxQueueMessages and MaxQueueBytes
// (backpressure): a Send that does not fit waits up to GroupCommit.QueueWait
// (and within its deadline) for room, then fails with
// transport.ErrOverloaded without anything proposed.
type batcher struct {
	n *Node
	g GroupCommit

	wake chan struct{} // buffered 1: a request was queued or an entry returned

	mu       sync.Mutex
	queue    []*sendReq    // FIFO; abandoned requests stay until taken, uncounted
	qMsgs    int           // messages of the pending requests in queue
	qBytes   int           // msgBytes of the pending requests in queue
	inFlight int           // entries proposed and not yet returned
	lastMsgs int           // messages of the entry that returned last
	room     chan struct{} // closed when queue space frees; nil if nobody waits
	closed   bool
}

func newBatcher(n *Node) *batcher {
	g := n.cfg.GroupCommit
	g.MaxInFlight = max(1, g.MaxInFlight)
	g.MaxQueueMessages = max(g.MaxQueueMessages, g.MaxMessages)
	g.MaxQueueBytes = max(g.MaxQueueBytes, g.MaxBytes)
	return &batcher{n: n, g: g, wake: make(chan struct{}, 1)}
}

func msgBytes(m *message.Message) int { return len(m.Topic) + len(m.Body) + len(m.Properties) + 64 }

// entryBytes bounds an entry below fsm.MaxCommandBytes with room for the
// command's framing.
const entryBytesLimit = fsm.MaxCommandBytes / 2

// send enqueues msgs and waits for their results, bounded by ctx.
//
// On an idle leader (nothing queued, no entry in Raft) the calling goroutine
// proposes its request itself and waits for the future: no hand-off to the
// batcher goroutine and back, which is two scheduler wake-ups less on the
// latency of a lone synchronous Send. A Send larger than one entry is split
// (sendSplit).
func (b *batcher) send(ctx context.Context, msgs []message.Message) ([]store.PutResult, error) {
	parts := b.split(msgs)
	if len(parts) > 1 {
		return b.sendSplit(ctx, parts)
	}
	req := newSendReq(msgs, time.Now(), nil)
	b.mu.Lock()
	if !b.closed && b.qMsgs == 0 && b.inFlight == 0 {
		b.inFlight++
		b.mu.Unlock()
		return b.sendNow(req)
	}
	b.mu.Unlock()
	req.done = make(chan sendResult, 1)
	if err := b.enqueue(ctx, []*sendReq{req}); err != nil {
		return nil, err
	}
	select {
	case r := <-req.done:
		return r.results, r.err
	case <-ctx.Done():
		if b.abandon(req) {
			return nil, ctx.Err()
		}
		select { // proposed: the result may already be there
		case r := <-req.done:
			return r.results, r.err
		default:
		}
		return nil, fmt.Errorf("%w: %v", transport.ErrOutcomeUnknown, ctx.Err())
	}
}

// newSendReq is a request for msgs, handed over at queued.
func newSendReq(msgs []message.Message, queued time.Time, g *sendGroup) *sendReq {
	req := &sendReq{msgs: msgs, queued: queued, group: g}
	for i := range msgs {
		req.bytes += msgBytes(&msgs[i])
	}
	return req
}

// enqueue appends reqs (the parts of one Send, kept together and in order)
// to the queue, waiting for room while the queue is full: up to
// GroupCommit.QueueWait, and at most nine tenths of what is left of ctx's
// deadline, so the caller gets the definite, retry-safe ErrOverloaded
// rather than its deadline. A Send always fits an empty queue.
func (b *batcher) enqueue(ctx context.Context, reqs []*sendReq) error {
	msgs, bytes := 0, 0
	for _, r := range reqs {
		msgs += len(r.msgs)
		bytes += r.bytes
	}
	var timeout <-chan time.Time
	for {
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			return fmt.Errorf("node shutting down: %w", transport.ErrNotLeader)
		}
		if b.qMsgs == 0 || b.qMsgs+msgs <= b.g.MaxQueueMessages && b.qBytes+bytes <= b.g.MaxQueueBytes {
			b.queue = append(b.queue, reqs...)
			b.qMsgs += msgs
			b.qBytes += bytes
			kick := b.ready() // wake the batcher only when it can act
			b.mu.Unlock()
			if kick {
				b.signal()
			}
			return nil
		}
		if b.room == nil {
			b.room = make(chan struct{})
		}
		room, qMsgs, qBytes := b.room, b.qMsgs, b.qBytes
		b.mu.Unlock()
		if timeout == nil {
			wait := b.g.QueueWait
			if dl, ok := ctx.Deadline(); ok {
				wait = min(wait, time.Until(dl)*9/10)
			}
			t := time.NewTimer(max(0, wait))
			defer t.Stop()
			timeout = t.C
		}
		overloaded := func() error {
			return fmt.Errorf("%w: %d messages (%d bytes) wait for the next Raft entry, the bounds are group_commit.max_queue_messages = %d and max_queue_bytes = %d; nothing of this send was stored, retry after a backoff",
				transport.ErrOverloaded, qMsgs, qBytes, b.g.MaxQueueMessages, b.g.MaxQueueBytes)
		}
		select {
		case <-room:
		case <-timeout:
			return overloaded()
		case <-ctx.Done(): // the queue stayed full until the deadline: nothing proposed
			return fmt.Errorf("%w (%w)", overloaded(), ctx.Err())
		case <-b.n.stop:
			return fmt.Errorf("node shutting down: %w", transport.ErrNotLeader)
		}
	}
}

// abandon withdraws req if it was not proposed yet and reports whether it did.
func (b *batcher) abandon(req *sendReq) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !req.state.CompareAndSwap(reqPending, reqAbandoned) {
		return false
	}
	b.qMsgs -= len(req.msgs)
	b.qBytes -= req.bytes
	b.freeRoom()
	return true
}

// freeRoom wakes the Sends waiting for queue space (mu held).
func (b *batcher) freeRoom() {
	if b.room != nil {
		close(b.room)
		b.room = nil
	}
}

// signal wakes the batcher goroutine.
func (b *batcher) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// sendNow proposes req alone on the calling goroutine, which holds an
// in-flight slot, and waits for the outcome. Raft resolves every future (at
// the latest when leadership is lost or Raft shuts down), so the wait is
// bounded without ctx.
func (b *batcher) sendNow(req *sendReq) ([]store.PutResult, error) {
	defer b.returned(len(req.msgs))
	req.state.Store(reqProposed)
	one := [1]*sendReq{req}
	f, data, err := b.apply(one[:], len(req.msgs), req.bytes)
	if err != nil {
		return nil, err
	}
	results, err := b.complete(f, len(req.msgs), len(data))
	if err == nil && len(results) != len(req.msgs) {
		return nil, fmt.Errorf("%w: %d results for %d messages", transport.ErrOutcomeUnknown, len(results), len(req.msgs))
	}
	return results, err
}

// returned gives back the in-flight slot of an entry of count messages.
func (b *batcher) returned(count int) {
	b.mu.Lock()
	b.inFlight--
	b.lastMsgs = count
	b.mu.Unlock()
	b.signal()
}

func (b *batcher) run() {
	for {
		batch, count, bytes := b.next()
		if batch == nil {
			return
		}
		b.propose(batch, count, bytes)
	}
}

// next waits until an entry may be proposed and takes its requests off the
// queue, holding an in-flight slot for it; nil when the node stops.
func (b *batcher) next() ([]*sendReq, int, int) {
	var delay *time.Timer
	defer func() {
		if delay != nil {
			delay.Stop()
		}
	}()
	for {
		var timeout <-chan time.Time
		b.mu.Lock()
		if b.ready() {
			wait := time.Duration(0)
			if b.inFlight == 0 && b.g.MaxDelay > 0 && !b.full() {
				wait = b.g.MaxDelay - time.Since(b.oldest())
			}
			if wait <= 0 {
				batch, count, bytes := b.take()
				b.inFlight++
				b.mu.Unlock()
				return batch, count, bytes
			}
			// MaxDelay: wait for more, or for the oldest to be due.
			if delay == nil {
				delay = time.NewTimer(wait)
			} else {
				delay.Reset(wait)
			}
			timeout = delay.C
		}
		b.mu.Unlock()
		select {
		case <-b.wake:
		case <-timeout:
		case <-b.n.stop:
			b.failQueued()
			return nil, 0, 0
		}
	}
}

// ready reports whether an entry may be proposed now (mu held): see batcher.
func (b *batcher) ready() bool {
	return b.qMsgs > 0 && b.inFlight < b.g.MaxInFlight &&
		(b.inFlight == 0 || b.full() || 2*b.qMsgs >= b.lastMsgs)
}

// full reports whether the queue holds a whole entry (mu held).
func (b *batcher) full() bool { return b.qMsgs >= b.g.MaxMessages || b.qBytes >= b.g.MaxBytes }

// oldest is the queue time of the first pending request (mu held).
func (b *batcher) oldest() time.Time {
	for _, r := range b.queue {
		if r.state.Load() == reqPending {
			return r.queued
		}
	}
	return time.Now()
}

// take removes from the head of the queue the pending requests of one
// entry, within the entry bounds, and marks them proposed (mu held).
func (b *batcher) take() ([]*sendReq, int, int) {
	var batch []*sendReq
	count, bytes := 0, 0
	i := 0
	for ; i < len(b.queue); i++ {
		r := b.queue[i]
		if r.state.Load() != reqPending {
			continue // abandoned: already uncounted
		}
		if r.group != nil && r.group.failed.Load() {
			b.drop(r) // an earlier part of its Send failed
			continue
		}
		if len(batch) > 0 && (count+len(r.msgs) > b.g.MaxMessages || bytes+r.bytes > b.g.MaxBytes ||
			count+len(r.msgs) > fsm.MaxBatchMessages || bytes+r.bytes > entryBytesLimit) {
			break
		}
		r.state.Store(reqProposed)
		batch = append(batch, r)
		count += len(r.msgs)
		bytes += r.bytes
	}
	rest := copy(b.queue, b.queue[i:])
	clear(b.queue[rest:])
	b.queue = b.queue[:rest]
	b.qMsgs -= count
	b.qBytes -= bytes
	b.freeRoom()
	return batch, count, bytes
}

// propose encodes batch as one entry and hands it to Raft; a goroutine
// waits for the future, gives the in-flight slot back and distributes the
// results.
func (b *batcher) propose(batch []*sendReq, count, bytes int) {
	f, data, err := b.apply(batch, count, bytes)
	if err != nil {
		failGroups(batch, err)
		b.returned(count)
		finish(batch, nil, err)
		return
	}
	b.n.goroutine(func() {
		results, err := b.complete(f, count, len(data))
		if err == nil && len(results) < count {
			err = fmt.Errorf("%w: %d results for %d messages", transport.ErrOutcomeUnknown, len(results), count)
		}
		failGroups(batch, err)
		b.returned(count)
		finish(batch, results, err)
	})
}

// apply encodes reqs as one MessageBatch entry and proposes it.
func (b *batcher) apply(reqs []*sendReq, count, bytes int) (raft.ApplyFuture, []byte, error) {
	if err := b.n.waitReady(context.Background()); err != nil {
		return nil, nil, err
	}
	now := time.Now()
	for _, r := range reqs {
		b.n.metrics.observeStage(stageQueue, now.Sub(r.queued))
	}
	groups := make([][]message.Message, len(reqs))
	for i, r := range reqs {
		groups[i] = r.msgs
	}
	data, err := fsm.EncodeMessageBatch(make([]byte, 0, bytes+64), now.UnixMilli(), b.n.host, count, groups...)
	if err != nil {
		return nil, nil, err
	}
	return b.n.raft.Apply(data, b.n.cfg.ApplyTimeout), data, nil
}

// complete waits for the entry's future and records its metrics.
func (b *batcher) complete(f raft.ApplyFuture, count, size int) ([]store.PutResult, error) {
	start := time.Now()
	resp, err := b.await(f)
	b.n.metrics.observeSend(count, size, time.Since(start), err)
	if resp == nil {
		return nil, err
	}
	b.n.metrics.observeStage(stageFSMApply, resp.ApplyDuration)
	return resp.Results, err
}

// await waits for f on the calling goroutine (one scheduling hop less than
// waitApply on the latency of every Send). Raft resolves every future, at
// the latest with ErrRaftShutdown.
func (b *batcher) await(f raft.ApplyFuture) (*fsm.ApplyResponse, error) {
	if err := f.Error(); err != nil {
		return nil, mapRaftError(err)
	}
	resp, _ := f.Response().(*fsm.ApplyResponse)
	if resp == nil {
		return nil, fmt.Errorf("%w: no response from the state machine", transport.ErrOutcomeUnknown)
	}
	return resp, resp.Err
}

// failGroups marks the split Sends of reqs failed when err is set, so that
// the batcher drops their parts not proposed yet. It runs before the
// entry's in-flight slot is given back.
func failGroups(reqs []*sendReq, err error) {
	if err == nil {
		return
	}
	for _, r := range reqs {
		if r.group != nil {
			r.group.failed.Store(true)
		}
	}
}

// finish hands each request its slice of results (or the entry's error).
func finish(reqs []*sendReq, results []store.PutResult, err error) {
	off := 0
	for _, r := range reqs {
		res := sendResult{err: err}
		if err == nil {
			if off+len(r.msgs) > len(results) {
				res.err = fmt.Errorf("%w: %d results for %d messages", transport.ErrOutcomeUnknown, len(results), off+len(r.msgs))
			} else {
				res.results = results[off : off+len(r.msgs) : off+len(r.msgs)]
			}
		}
		off += len(r.msgs)
		r.done <- res
	}
}

// failQueued answers every request that was never proposed (nothing of it
// is stored) and refuses new ones.
func (b *batcher) failQueued() {
	b.mu.Lock()
	b.closed = true
	var failed []*sendReq
	for _, r := range b.queue {
		if r.state.CompareAndSwap(reqPending, reqProposed) {
			failed = append(failed, r)
		}
	}
	b.queue, b.qMsgs, b.qBytes = nil, 0, 0
	b.freeRoom()
	b.mu.Unlock()
	for _, r := range failed {
		r.done <- sendResult{err: fmt.Errorf("node shutting down: %w", transport.ErrNotLeader)}
	}
}
