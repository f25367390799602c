package client

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
)

// Bounds of one merged Send RPC (see coalescer): far below the server's
// limits (4,096 messages, wire.MaxRequestBytes), so a merged request is
// never refused for its size.
const (
	mergeMaxMessages = 1024
	mergeMaxBytes    = 4 << 20
)

// DefaultMaxSendsInFlight is Options.MaxSendsInFlight's default.
const DefaultMaxSendsInFlight = 16

// coalescer merges concurrent Sends into fewer Send RPCs, the way the
// leader's group commit merges Sends into fewer Raft entries: each Send RPC
// costs the client and the leader a gRPC call whatever it carries, so 2,000
// single-message Sends outstanding cost 2,000 calls unless they travel
// together.
//
// Adaptive, with no timer: while fewer than max Send RPCs are in flight
// and nothing waits, a Send is sent at once on the caller's goroutine (a
// lone synchronous sender sees no added latency). Otherwise it waits in a
// queue, and whenever an RPC returns, everything queued (up to
// mergeMaxMessages and mergeMaxBytes) leaves as one RPC on a goroutine of
// the coalescer. Each caller gets the results of its own messages, in
// order.
//
// Errors stay per Send where they can be: a caller whose context ends while
// its Send is still queued gets the context's error and nothing of it is
// sent; once merged, its outcome is unknown, as for a Send whose RPC was
// sent. A merged RPC refused as InvalidArgument (one caller's bad message
// fails the whole request before anything is proposed) is sent again Send
// by Send, so each caller gets its own verdict.
type coalescer struct {
	c   *Client
	max int

	mu       sync.Mutex
	inFlight int
	queue    []*queuedSend
	wg       sync.WaitGroup // merged RPCs still running
}

type queuedSend struct {
	msgs  []*pb.Message
	bytes int
	// deadline is the caller's (zero: none); a merged RPC gets the latest
	// of its members'.
	deadline time.Time
	taken    bool // in a merged RPC (mu held)
	// idempotent: every message carries a PSEQ (see send).
	idempotent bool
	done       chan mergedReply // buffered 1
}

type mergedReply struct {
	results []*pb.SendResult
	err     error
	alone   bool // send again on its own (see coalescer)
}

func newCoalescer(c *Client, max int) *coalescer { return &coalescer{c: c, max: max} }

// send stores msgs (as Client.Send) and returns the server's results.
// idempotent says every message carries a PSEQ: the RPC may be sent again
// after an unknown outcome.
func (co *coalescer) send(ctx context.Context, msgs []*pb.Message, idempotent bool) ([]*pb.SendResult, error) {
	size := 0
	for _, m := range msgs {
		size += protoSize(m)
	}
	co.mu.Lock()
	if co.max < 0 || len(co.queue) == 0 && co.inFlight < co.max || len(msgs) >= mergeMaxMessages || size >= mergeMaxBytes {
		co.inFlight++
		co.mu.Unlock()
		defer co.release()
		return co.c.sendRPC(ctx, msgs, idempotent)
	}
	q := &queuedSend{msgs: msgs, bytes: size, idempotent: idempotent, done: make(chan mergedReply, 1)}
	q.deadline, _ = ctx.Deadline()
	co.queue = append(co.queue, q)
	co.mu.Unlock()
	select {
	case r := <-q.done:
		if r.alone {
			return co.c.sendRPC(ctx, msgs, idempotent)
		}
		return r.results, r.err
	case <-ctx.Done():
		if co.withdraw(q) {
			return nil, ctx.Err()
		}
		select { // merged: the reply may be there already
		case r := <-q.done:
			if !r.alone {
				return r.results, r.err
			}
			return nil, ctx.Err() // refused as invalid: nothing was stored
		default:
		}
		return nil, fmt.Errorf("%w: the send left in a merged request: %w", ErrOutcomeUnknown, ctx.Err())
	}
}

// withdraw removes q from the queue unless it was merged already, and
// reports whether it did.
func (co *coalescer) withdraw(q *queuedSend) bool {
	co.mu.Lock()
	defer co.mu.Unlock()
	if q.taken {
		return false
	}
	for i, p := range co.queue {
		if p == q {
			co.queue = append(co.queue[:i], co.queue[i+1:]...)
			break
		}
	}
	return true
}

// release gives back an RPC slot and sends what waits, one merged RPC per
// free slot.
func (co *coalescer) release() {
	co.mu.Lock()
	defer co.mu.Unlock()
	co.inFlight--
	for len(co.queue) > 0 && co.inFlight < co.max {
		batch := co.take()
		co.inFlight++
		co.wg.Add(1)
		go co.sendMerged(batch)
	}
}

// take removes the head of the queue up to the merge bounds (mu held); it
// always takes at least one.
func (co *coalescer) take() []*queuedSend {
	n, msgs, bytes := 0, 0, 0
	for ; n < len(co.queue); n++ {
		q := co.queue[n]
		if n > 0 && (msgs+len(q.msgs) > mergeMaxMessages || bytes+q.bytes > mergeMaxBytes) {
			break
		}
		q.taken = true
		msgs += len(q.msgs)
		bytes += q.bytes
	}
	batch := append([]*queuedSend(nil), co.queue[:n]...)
	rest := copy(co.queue, co.queue[n:])
	clear(co.queue[rest:])
	co.queue = co.queue[:rest]
	return batch
}

// sendMerged sends batch as one RPC and hands each member its results.
func (co *coalescer) sendMerged(batch []*queuedSend) {
	defer co.wg.Done()
	var msgs []*pb.Message
	var deadline time.Time
	bounded := true    // every member has a deadline
	idempotent := true // every member's messages carry a PSEQ
	for _, q := range batch {
		msgs = append(msgs, q.msgs...)
		idempotent = idempotent && q.idempotent
		if q.deadline.IsZero() {
			bounded = false
		} else if q.deadline.After(deadline) {
			deadline = q.deadline
		}
	}
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if bounded {
		ctx, cancel = context.WithDeadline(ctx, deadline)
	}
	results, err := co.c.sendRPC(ctx, msgs, idempotent)
	cancel()
	co.release()
	if err != nil && len(batch) > 1 && status.Code(err) == codes.InvalidArgument {
		for _, q := range batch {
			q.done <- mergedReply{alone: true}
		}
		return
	}
	off := 0
	for _, q := range batch {
		r := mergedReply{err: err}
		if err == nil {
			r.results = results[off : off+len(q.msgs) : off+len(q.msgs)]
		}
		off += len(q.msgs)
		q.done <- r
	}
}

// wait waits for the merged RPCs still running (Client.Close).
func (co *coalescer) wait() { co.wg.Wait() }

// protoSize estimates the request bytes of m.
func protoSize(m *pb.Message) int {
	n := len(m.GetTopic()) + len(m.GetBody()) + 64
	for _, p := range m.GetProperties() {
		n += len(p.GetKey()) + len(p.GetValue()) + 8
	}
	return n
}

// sendRPC runs one Send RPC on the leader (Client.write's retries) and
// checks that it answered every message. An idempotent request (every
// message carries a PSEQ) is also sent again after a transient error that
// leaves its outcome unknown: the cluster stores each sequence once.
func (c *Client) sendRPC(ctx context.Context, msgs []*pb.Message, idempotent bool) ([]*pb.SendResult, error) {
	var resp *pb.SendResponse
	req := &pb.SendRequest{Messages: msgs}
	err := c.write(ctx, idempotent, func(ctx context.Context, r pb.RaftMQClient) (err error) {
		resp, err = r.Send(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(resp.GetResults()) != len(msgs) {
		return nil, fmt.Errorf("%w: server returned %d results for %d messages", ErrOutcomeUnknown, len(resp.GetResults()), len(msgs))
	}
	return resp.GetResults(), nil
}
