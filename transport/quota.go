package transport

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
)

// Quotas are the limits a server applies per client (a principal, or the
// peer's IP address without authentication). Zero turns one off. Other
// nodes (the node token) are never limited: the node that received a
// request applied its client's quota already.
type Quotas struct {
	// ProduceMessagesPerSecond and ProduceBytesPerSecond bound one client's
	// sends (bodies counted), each with a burst of one second's worth
	// (at least one request's). A send over the rate is held until its
	// tokens come, up to a second; beyond that it is refused.
	ProduceMessagesPerSecond float64
	ProduceBytesPerSecond    float64
	// LongPollsPerConnection bounds the Pulls with a wait that one
	// connection holds at once.
	LongPollsPerConnection int
	// RefusalDelay holds a send refused for its rate this long before the
	// answer (see holdRefusal); 0 answers at once.
	RefusalDelay time.Duration
	// MaxTopics bounds the cluster's topics: a CreateTopic, or a Send that
	// would create a topic on first use, beyond it is refused.
	MaxTopics int
}

// Enabled reports whether any limit is set.
func (l Quotas) Enabled() bool {
	return l.ProduceMessagesPerSecond > 0 || l.ProduceBytesPerSecond > 0 || l.LongPollsPerConnection > 0 || l.MaxTopics > 0
}

// quotas holds the per-client state of the Quotas.
type quotas struct {
	lim     Quotas
	now     func() time.Time
	limited atomic.Uint64 // refused
	// throttled counts sends held until their client's rate allowed them.
	throttled atomic.Uint64

	mu      sync.Mutex
	clients map[string]*clientQuota
	polls   map[string]int // by connection (peer address)
}

type clientQuota struct {
	msgs, bytes *rate.Limiter
	seen        time.Time
}

// idleClient is how long a client's buckets are kept unused (full buckets
// are what a new client gets anyway).
const idleClient = time.Minute

func newQuotas(lim Quotas, now func() time.Time) *quotas {
	return &quotas{lim: lim, now: now, clients: map[string]*clientQuota{}, polls: map[string]int{}}
}

func (q *quotas) admit(ctx context.Context, s *Server, client string, req any) (func(), error) {
	if client == "user:node" {
		return func() {}, nil
	}
	switch r := req.(type) {
	case *pb.SendRequest:
		if err := q.produce(ctx, client, r); err != nil {
			return nil, err
		}
		return func() {}, q.topicLimit(s, r)
	case *pb.CreateTopicRequest:
		return func() {}, q.createLimit(s, r.GetName())
	case *pb.PullRequest:
		if r.GetMaxWaitMs() > 0 {
			return q.longPoll(ctx)
		}
	}
	return func() {}, nil
}

func (q *quotas) refuse(format string, args ...any) error {
	q.limited.Add(1)
	return status.Error(codes.ResourceExhausted, fmt.Sprintf("%v: ", errQuota)+fmt.Sprintf(format, args...))
}

// produce admits a send within the client's rates. A send over the rate
// waits for its tokens up to maxQuotaWait (and within its deadline), so a
// flooding client is paced instead of spinning on refusals; one that would
// wait longer is refused at once with RESOURCE_EXHAUSTED.
func (q *quotas) produce(ctx context.Context, client string, r *pb.SendRequest) error {
	if q.lim.ProduceMessagesPerSecond <= 0 && q.lim.ProduceBytesPerSecond <= 0 {
		return nil
	}
	n, size := len(r.GetMessages()), 0
	for _, m := range r.GetMessages() {
		size += len(m.GetBody())
	}
	now := q.now()
	c := q.client(client, now, n, size)
	var wait time.Duration
	var held []*rate.Reservation
	for _, b := range []struct {
		lim  *rate.Limiter
		n    int
		what string
		rate float64
	}{{c.msgs, n, "messages", q.lim.ProduceMessagesPerSecond}, {c.bytes, size, "body bytes", q.lim.ProduceBytesPerSecond}} {
		if b.lim == nil {
			continue
		}
		res := b.lim.ReserveN(now, b.n)
		d := res.DelayFrom(now)
		if !res.OK() || d > maxQuotaWait || !fitsDeadline(ctx, d) {
			res.CancelAt(now)
			for _, h := range held {
				h.CancelAt(now)
			}
			q.holdRefusal(ctx)
			return q.refuse("%s may send %.0f %s per second", client, b.rate, b.what)
		}
		held = append(held, res)
		wait = max(wait, d)
	}
	if wait <= 0 {
		return nil
	}
	q.throttled.Add(1)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}

// maxQuotaWait bounds how long a send over its client's rate is held.
const maxQuotaWait = time.Second

// holdRefusal delays a refusal by Quotas.RefusalDelay (within ctx): a
// client that resends at once on RESOURCE_EXHAUSTED then makes at most
// (its concurrency / RefusalDelay) requests per second, instead of
// spinning on refusals that cost the server CPU its other clients need.
func (q *quotas) holdRefusal(ctx context.Context) {
	if q.lim.RefusalDelay <= 0 {
		return
	}
	t := time.NewTimer(q.lim.RefusalDelay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func fitsDeadline(ctx context.Context, d time.Duration) bool {
	dl, ok := ctx.Deadline()
	return !ok || time.Until(dl) > d
}

// client returns the buckets of client, made (or widened) to hold at least
// one request of n messages and size bytes.
func (q *quotas) client(name string, now time.Time, n, size int) *clientQuota {
	q.mu.Lock()
	defer q.mu.Unlock()
	c := q.clients[name]
	if c == nil {
		if len(q.clients) > 1024 {
			q.evictIdle(now)
		}
		c = &clientQuota{}
		if r := q.lim.ProduceMessagesPerSecond; r > 0 {
			c.msgs = rate.NewLimiter(rate.Limit(r), max(int(r), 1))
		}
		if r := q.lim.ProduceBytesPerSecond; r > 0 {
			c.bytes = rate.NewLimiter(rate.Limit(r), max(int(r), 1))
		}
		q.clients[name] = c
	}
	if c.msgs != nil && c.msgs.Burst() < n {
		c.msgs.SetBurstAt(now, n)
	}
	if c.bytes != nil && c.bytes.Burst() < size {
		c.bytes.SetBurstAt(now, size)
	}
	c.seen = now
	return c
}

func (q *quotas) evictIdle(now time.Time) {
	for k, c := range q.clients {
		if now.Sub(c.seen) > idleClient {
			delete(q.clients, k)
		}
	}
}

func (q *quotas) longPoll(ctx context.Context) (func(), error) {
	limit := q.lim.LongPollsPerConnection
	pr, ok := peer.FromContext(ctx)
	if limit <= 0 || !ok || pr.Addr == nil {
		return func() {}, nil
	}
	conn := pr.Addr.String()
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.polls[conn] >= limit {
		return nil, q.refuse("connection %s holds %d long polls already (the limit)", conn, limit)
	}
	q.polls[conn]++
	return func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		if q.polls[conn]--; q.polls[conn] <= 0 {
			delete(q.polls, conn)
		}
	}, nil
}

// topicLimit refuses a Send that would create topics beyond MaxTopics.
func (q *quotas) topicLimit(s *Server, r *pb.SendRequest) error {
	if q.lim.MaxTopics <= 0 {
		return nil
	}
	for _, m := range r.GetMessages() {
		if err := q.createLimit(s, m.GetTopic()); err != nil {
			return err
		}
	}
	return nil
}

func (q *quotas) createLimit(s *Server, topic string) error {
	if q.lim.MaxTopics <= 0 {
		return nil
	}
	topics := s.b.Reader().Topics()
	for _, t := range topics {
		if t.Name == topic {
			return nil
		}
	}
	if len(topics) >= q.lim.MaxTopics {
		return q.refuse("the cluster holds %d topics, the limit; %q is not created", len(topics), topic)
	}
	return nil
}
