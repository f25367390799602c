package node

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/fsm"
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
	msgs   []commitlog.Message
	bytes  int
	queued time.Time // when Send handed it over
	state  atomic.Int32
	done   chan sendResult // buffered 1; nil on the idle fast path
}

type sendResult struct {
	results []store.PutResult
	err     error
}

// batcher is the leader's group commit: concurrent Sends become one
// MessageBatch entry, bounded by GroupCommit.MaxBytes and MaxMessages.
//
// It is adaptive, with no timer on the hot path: at most
// GroupCommit.MaxInFlight entries are proposed and not yet applied; while
// they are in Raft, new Sends queue up, and the moment one returns, all that
// queued (within the bounds) becomes the next entry. A lone Send on an idle
// leader is proposed at once; under load entries grow with the load.
type batcher struct {
	n     *Node
	in    chan *sendReq
	slots chan struct{} // one token per entry in flight
	carry *sendReq      // run goroutine only: did not fit the previous entry
}

func newBatcher(n *Node) *batcher {
	return &batcher{n: n, in: make(chan *sendReq, 4*n.cfg.Raft.MaxAppendEntries),
		slots: make(chan struct{}, max(1, n.cfg.GroupCommit.MaxInFlight))}
}

func msgBytes(m *commitlog.Message) int { return len(m.Topic) + len(m.Body) + len(m.Properties) + 64 }

// send enqueues msgs and waits for their results, bounded by ctx.
//
// On an idle leader (nothing queued, an in-flight slot free) the calling
// goroutine proposes its request itself and waits for the future: no hand-off
// to the batcher goroutine and back, which is two scheduler wake-ups less on
// the latency of a lone synchronous Send.
func (b *batcher) send(ctx context.Context, msgs []commitlog.Message) ([]store.PutResult, error) {
	req := &sendReq{msgs: msgs, queued: time.Now()}
	for i := range msgs {
		req.bytes += msgBytes(&msgs[i])
	}
	if len(b.in) == 0 {
		select {
		case b.slots <- struct{}{}:
			return b.sendNow(req)
		default:
		}
	}
	req.done = make(chan sendResult, 1)
	select {
	case b.in <- req:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-b.n.stop:
		return nil, fmt.Errorf("node shutting down: %w", transport.ErrNotLeader)
	}
	select {
	case r := <-req.done:
		return r.results, r.err
	case <-ctx.Done():
		if req.state.CompareAndSwap(reqPending, reqAbandoned) {
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

// sendNow proposes req alone on the calling goroutine, which holds an
// in-flight slot, and waits for the outcome. Raft resolves every future (at
// the latest when leadership is lost or Raft shuts down), so the wait is
// bounded without ctx.
func (b *batcher) sendNow(req *sendReq) ([]store.PutResult, error) {
	defer func() { <-b.slots }()
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
func (b *batcher) run() {
	for {
		first := b.carry
		b.carry = nil
		if first == nil {
			select {
			case <-b.n.stop:
				b.failQueued()
				return
			case first = <-b.in:
			}
		}
		select { // wait for an entry in flight to return: meanwhile Sends queue up
		case <-b.n.stop:
			b.fail(first)
			b.failQueued()
			return
		case b.slots <- struct{}{}:
		}
		if !b.propose(b.gather(first)) {
			<-b.slots
		}
	}
}

// gather takes first and whatever else is queued (waiting up to MaxDelay if
// set), within the group-commit and entry bounds; a request that does not
// fit is carried to the next entry.
func (b *batcher) gather(first *sendReq) []*sendReq {
	g := b.n.cfg.GroupCommit
	batch := []*sendReq{first}
	bytes, count := first.bytes, len(first.msgs)
	var timeout <-chan time.Time
	if g.MaxDelay > 0 {
		t := time.NewTimer(g.MaxDelay)
		defer t.Stop()
		timeout = t.C
	}
	for bytes < g.MaxBytes && count < g.MaxMessages {
		var r *sendReq
		select {
		case r = <-b.in:
		case <-timeout: // nil channel without MaxDelay: never ready
			return batch
		default:
			if timeout == nil {
				return batch
			}
			select {
			case r = <-b.in:
			case <-timeout:
				return batch
			}
		}
		if count+len(r.msgs) > fsm.MaxBatchMessages || bytes+r.bytes > fsm.MaxCommandBytes/2 {
			b.carry = r
			return batch
		}
		batch = append(batch, r)
		bytes += r.bytes
		count += len(r.msgs)
	}
	return batch
}

// propose encodes the live requests of batch as one entry and hands it to
// Raft; a goroutine waits for the future, distributes the results and gives
// the in-flight slot back. It reports whether it took the slot.
func (b *batcher) propose(batch []*sendReq) bool {
	live := batch[:0]
	count, bytes := 0, 0
	for _, r := range batch {
		if r.state.CompareAndSwap(reqPending, reqProposed) {
			live = append(live, r)
			count += len(r.msgs)
			bytes += r.bytes
		}
	}
	if len(live) == 0 {
		return false
	}
	f, data, err := b.apply(live, count, bytes)
	if err != nil {
		finish(live, nil, err)
		return false
	}
	b.n.goroutine(func() {
		results, err := b.complete(f, count, len(data))
		<-b.slots
		finish(live, results, err)
	})
	return true
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
	groups := make([][]commitlog.Message, len(reqs))
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

func (b *batcher) failQueued() {
	for {
		select {
		case r := <-b.in:
			b.fail(r)
		default:
			return
		}
	}
}

// fail answers a request that was never proposed: nothing of it is stored.
func (b *batcher) fail(r *sendReq) {
	if r.state.CompareAndSwap(reqPending, reqProposed) {
		r.done <- sendResult{err: fmt.Errorf("node shutting down: %w", transport.ErrNotLeader)}
	}
}
