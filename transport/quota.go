package transport

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/auth"
	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
	"github.com/raftmq/raftmq/quota"
)

// Quotas are the limits a server applies per client (a principal, or the
// peer's IP address without authentication). Zero turns one off. Other
// nodes (the node token) are never limited: the node that received a
// request applied its client's quota already.
type Quotas struct {
	// Produce paces each client's sends (package quota); nil: no rate.
	// A node shares one with its RocketMQ broker.
	Produce *quota.Limiter
	// LongPollsPerConnection bounds the Pulls with a wait that one
	// connection holds at once.
	LongPollsPerConnection int
	// MaxTopics bounds the cluster's topics: a CreateTopic, or a Send that
	// would create a topic on first use, beyond it is refused.
	MaxTopics int
}

// Enabled reports whether any limit is set.
func (l Quotas) Enabled() bool {
	return l.Produce != nil || l.LongPollsPerConnection > 0 || l.MaxTopics > 0
}

// quotas holds the per-client state of the Quotas.
type quotas struct {
	lim     Quotas
	limited atomic.Uint64 // refused

	mu    sync.Mutex
	polls map[string]int // by connection (peer address)
}

func newQuotas(lim Quotas) *quotas {
	return &quotas{lim: lim, polls: map[string]int{}}
}

func (q *quotas) admit(ctx context.Context, s *Server, p *auth.Principal, client string, req any) (func(), error) {
	if p != nil && p.Node {
		return func() {}, nil
	}
	switch r := req.(type) {
	case *pb.SendRequest:
		if err := q.produce(ctx, p, client, r); err != nil {
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
	return status.Error(codes.ResourceExhausted, fmt.Sprintf("%v: ", quota.ErrExceeded)+fmt.Sprintf(format, args...))
}

// produce admits a send by client (p's own rates, if any) through the
// shared limiter.
func (q *quotas) produce(ctx context.Context, p *auth.Principal, client string, r *pb.SendRequest) error {
	size := 0
	for _, m := range r.GetMessages() {
		size += len(m.GetBody())
	}
	msgs, bytes := p.ProduceRates()
	err := q.lim.Produce.SendAt(ctx, client, quota.Rates{MessagesPerSecond: msgs, BytesPerSecond: bytes}, len(r.GetMessages()), size)
	if errors.Is(err, quota.ErrExceeded) {
		q.limited.Add(1)
		return status.Error(codes.ResourceExhausted, err.Error())
	}
	if err != nil {
		return status.FromContextError(err).Err()
	}
	return nil
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
