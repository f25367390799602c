package node

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

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
	msgs  []commitlog.Message
	bytes int
	state atomic.Int32
	done  chan sendResult // buffered 1
}

type sendResult struct {
	results []store.PutResult
	err     error
}

// batcher is the leader's group commit: concurrent Sends become one
// MessageBatch entry, bounded by GroupCommit.MaxBytes and MaxMessages.
type batcher struct {
	n  *Node
	in chan *sendReq
}

func newBatcher(n *Node) *batcher {
	return &batcher{n: n, in: make(chan *sendReq, 4*n.cfg.Raft.MaxAppendEntries)}
}

func msgBytes(m *commitlog.Message) int { return len(m.Topic) + len(m.Body) + len(m.Properties) + 64 }

// send enqueues msgs and waits for their results, bounded by ctx.
func (b *batcher) send(ctx context.Context, msgs []commitlog.Message) ([]store.PutResult, error) {
	req := &sendReq{msgs: msgs, done: make(chan sendResult, 1)}
	for i := range msgs {
		req.bytes += msgBytes(&msgs[i])
	}
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

func (b *batcher) run() {
	for {
		var first *sendReq
		select {
		case <-b.n.stop:
			b.failQueued()
			return
		case first = <-b.in:
		}
		b.propose(b.gather(first))
	}
}

// gather takes first and whatever else is queued (waiting up to MaxDelay),
// within the group-commit bounds.
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
		if timeout == nil {
			select {
			case r = <-b.in:
			default:
				return batch
			}
		} else {
			select {
			case r = <-b.in:
			case <-timeout:
				return batch
			}
		}
		if count+len(r.msgs) > fsm.MaxBatchMessages || bytes+r.bytes > fsm.MaxCommandBytes/2 {
			b.propose(batch) // r does not fit the entry bound: flush what we have
			batch, bytes, count = nil, 0, 0
		}
		batch = append(batch, r)
		bytes += r.bytes
		count += len(r.msgs)
	}
	return batch
}

// propose encodes the live requests of batch as one entry and hands it to
// Raft; a goroutine waits for the future and distributes the results.
func (b *batcher) propose(batch []*sendReq) {
	live := batch[:0]
	cmd := fsm.Command{Type: fsm.CmdMessageBatch, LeaderTimestamp: time.Now().UnixMilli(), LeaderHost: b.n.host}
	for _, r := range batch {
		if r.state.CompareAndSwap(reqPending, reqProposed) {
			live = append(live, r)
			cmd.Messages = append(cmd.Messages, r.msgs...)
		}
	}
	if len(live) == 0 {
		return
	}
	if err := b.n.waitReady(context.Background()); err != nil {
		finish(live, nil, err)
		return
	}
	data, err := cmd.Encode(nil)
	if err != nil {
		finish(live, nil, err)
		return
	}
	f := b.n.raft.Apply(data, b.n.cfg.ApplyTimeout)
	start := time.Now()
	b.n.goroutine(func() {
		resp, err := b.n.waitApply(context.Background(), f)
		b.n.metrics.observeSend(len(cmd.Messages), len(data), time.Since(start), err)
		var results []store.PutResult
		if resp != nil {
			results = resp.Results
		}
		finish(live, results, err)
	})
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
			if r.state.CompareAndSwap(reqPending, reqProposed) {
				r.done <- sendResult{err: fmt.Errorf("node shutting down: %w", transport.ErrNotLeader)}
			}
		default:
			return
		}
	}
}
