package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/transport"
)

// errPartDropped answers a part of a split Send that was never proposed
// because an earlier part of the same Send failed.
var errPartDropped = errors.New("node: an earlier part of this send failed; this part was not stored")

// partBytes is the most message bytes (msgBytes) split puts in one part:
// GroupCommit.MaxBytes, within what one entry may hold.
func (b *batcher) partBytes() int { return min(b.g.MaxBytes, entryBytesLimit) }

// split cuts msgs, in order, into parts of at most partBytes and
// GroupCommit.MaxMessages each; a message larger than partBytes is a part
// of its own. A Send that fits one entry is one part.
func (b *batcher) split(msgs []message.Message) [][]message.Message {
	limit := b.partBytes()
	var parts [][]message.Message
	start, bytes := 0, 0
	for i := range msgs {
		mb := msgBytes(&msgs[i])
		if i > start && (bytes+mb > limit || i-start >= b.g.MaxMessages) {
			parts = append(parts, msgs[start:i:i])
			start, bytes = i, 0
		}
		bytes += mb
	}
	return append(parts, msgs[start:])
}

// sendSplit sends the parts of one Send as consecutive requests: queued
// together and in order, so the batcher proposes them in order (each
// possibly packed with other Sends, never with more than MaxBytes), and
// Raft applies them in that order. The results come back in the order of
// the request.
//
// A split Send is not atomic. If its first part fails with a definite
// error and no other part was proposed, that error is returned (nothing
// stored). If a later part fails, or the caller's ctx ends after a part
// was proposed, the parts not proposed yet are withdrawn and the Send's
// outcome is unknown (transport.ErrOutcomeUnknown): some of its messages
// may be stored.
func (b *batcher) sendSplit(ctx context.Context, parts [][]message.Message) ([]store.PutResult, error) {
	g := &sendGroup{}
	reqs := make([]*sendReq, len(parts))
	total := 0
	now := time.Now()
	for i, p := range parts {
		reqs[i] = newSendReq(p, now, g)
		reqs[i].done = make(chan sendResult, 1)
		total += len(p)
	}
	if err := b.enqueue(ctx, reqs); err != nil {
		return nil, err
	}
	results := make([]store.PutResult, 0, total)
	for i, r := range reqs {
		select {
		case res := <-r.done:
			if res.err != nil {
				g.failed.Store(true)
				return nil, b.partFailed(reqs, i, res.err)
			}
			results = append(results, res.results...)
		case <-ctx.Done():
			g.failed.Store(true)
			if b.withdraw(reqs[i:]) && i == 0 {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("%w: send split into %d entries, %d of them stored when the caller gave up: %v",
				transport.ErrOutcomeUnknown, len(reqs), i, ctx.Err())
		}
	}
	return results, nil
}

// partFailed is the error of a split Send whose part i failed with err.
func (b *batcher) partFailed(reqs []*sendReq, i int, err error) error {
	none := b.withdraw(reqs[i+1:])
	if i == 0 && none && !errors.Is(err, transport.ErrOutcomeUnknown) {
		return err // definite, and nothing else of the Send was proposed
	}
	return fmt.Errorf("%w: send split into %d entries, %d of them stored before entry %d failed: %v",
		transport.ErrOutcomeUnknown, len(reqs), i, i+1, err)
}

// withdraw abandons the requests of reqs not proposed yet and reports
// whether none of them was proposed.
func (b *batcher) withdraw(reqs []*sendReq) bool {
	none := true
	for _, r := range reqs {
		if !b.abandon(r) && r.state.Load() == reqProposed {
			none = false
		}
	}
	return none
}

// drop takes a pending part of a failed split Send off the count and
// answers it without proposing it (mu held; the caller removes it from the
// queue).
func (b *batcher) drop(r *sendReq) {
	if !r.state.CompareAndSwap(reqPending, reqAbandoned) {
		return
	}
	b.qMsgs -= len(r.msgs)
	b.qBytes -= r.bytes
	r.done <- sendResult{err: errPartDropped}
}
