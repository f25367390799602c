package client

import (
	"context"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
	"github.com/raftmq/raftmq/wire"
)

// Options configure a Client. Zero values take the defaults.
type Options struct {
	Logger hclog.Logger
	// TLS, when set, makes every connection TLS with this config (nil:
	// plaintext). The server's certificate must chain to RootCAs (nil: the
	// system's roots) and name the host dialled; Certificates, when set,
	// are presented as the client's identity. tlsconf.ClientConfig builds
	// one from PEM files.
	TLS *tls.Config
	// Token, when set, is sent as "authorization: Bearer <token>" with
	// every call. It is sent over plaintext too when TLS is nil: anyone
	// on the network path can read it and use it, so use a token without
	// TLS only on a network you trust.
	Token string
	// DialOptions are added after the client's own (transport credentials
	// from TLS, the token, 64 MiB messages, its codec and windows), so an
	// option given here overrides the same option of the client's.
	DialOptions []grpc.DialOption
	// RetryTimeout bounds how long one call keeps trying across leader
	// changes and unreachable nodes (default 30 s: an election after a
	// leader's kill -9 takes a few seconds with the default Raft timeouts,
	// and a process restart longer). The call's context may end it sooner.
	// It also bounds each try of a write whose context has no deadline.
	RetryTimeout time.Duration
	// Backoff is the first pause between tries, doubled up to 250 ms
	// (default 50 ms); each pause is jittered to [d/2, d) so clients that
	// lost the same leader do not probe in lockstep.
	Backoff time.Duration
	// ProbeTimeout bounds one Status probe while looking for the leader (default 2 s).
	ProbeTimeout time.Duration
	// ReadFromAny sends reads to any reachable node instead of the leader.
	ReadFromAny bool
	// MaxSendsInFlight bounds the Send RPCs this client has outstanding;
	// Sends beyond it wait and leave together as one RPC when one returns
	// (default DefaultMaxSendsInFlight; negative: every Send is its own
	// RPC). A lone Send never waits.
	MaxSendsInFlight int
	// DisableIdempotence stops the client from stamping messages with its
	// producer id and a sequence (the PSEQ property). By default every
	// message carries them, the cluster stores each sequence once, and a
	// Send whose outcome is unknown (a leader lost after proposing, a
	// broken connection) is sent again within RetryTimeout and the call's
	// context, so it ends stored once or refused, not unknown.
	DisableIdempotence bool
	// IdempotenceWindow bounds the sequences outstanding at once (default
	// DefaultIdempotenceWindow, the cluster's dedup window; larger values
	// risk refusals as too old, never duplicates). Sends beyond it wait.
	IdempotenceWindow int
}

func (o *Options) defaults() {
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.RetryTimeout <= 0 {
		o.RetryTimeout = DefaultRetryTimeout
	}
	if o.Backoff <= 0 {
		o.Backoff = 50 * time.Millisecond
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = 2 * time.Second
	}
	if o.MaxSendsInFlight == 0 {
		o.MaxSendsInFlight = DefaultMaxSendsInFlight
	}
	if o.IdempotenceWindow <= 0 {
		o.IdempotenceWindow = DefaultIdempotenceWindow
	}
}

// DefaultRetryTimeout is Options.RetryTimeout's default.
const DefaultRetryTimeout = 30 * time.Second

// Client talks to a raftmq cluster. It is safe for concurrent use.
type Client struct {
	opts  Options
	log   hclog.Logger
	ids   *IDGenerator
	mu    sync.Mutex
	seeds []string // seeds plus API addresses learnt from Status
	conns map[string]*grpc.ClientConn
	dial  []grpc.DialOption // Options.dialOptions
	lead  string            // leader API address, "" if unknown
	done  bool
	sends *coalescer
	seq   *sequencer // nil: Options.DisableIdempotence
	// resent counts idempotent writes sent again after an unknown outcome.
	resent atomic.Uint64
}

// Stats are a client's counters.
type Stats struct {
	// Resent counts the tries of idempotent writes (Sends, CommitOffset)
	// sent again after a try whose outcome was unknown.
	Resent uint64
}

// Stats returns the client's counters.
func (c *Client) Stats() Stats { return Stats{Resent: c.resent.Load()} }

// New connects to the cluster through any of seeds (host:port API
// addresses) and looks up the leader. It fails only if no seed answers.
func New(ctx context.Context, seeds []string, opts Options) (*Client, error) {
	if len(seeds) == 0 {
		return nil, ErrNoSeeds
	}
	opts.defaults()
	dial, err := opts.dialOptions()
	if err != nil {
		return nil, err
	}
	c := &Client{opts: opts, log: opts.Logger.Named("client"), ids: NewIDGenerator(),
		seeds: append([]string(nil), seeds...), conns: map[string]*grpc.ClientConn{}, dial: dial}
	if opts.Token != "" && opts.TLS == nil {
		c.log.Warn("the token is sent without TLS: anyone on the network path can read it")
	}
	c.sends = newCoalescer(c, opts.MaxSendsInFlight)
	if !opts.DisableIdempotence {
		c.seq = newSequencer(opts.IdempotenceWindow)
	}
	if _, err := c.resolve(ctx); err != nil && !anyReached(err) {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// NewMsgID returns a fresh unique message id (UNIQ_KEY).
func (c *Client) NewMsgID() string { return c.ids.Next() }

// Close closes every connection and waits for the merged Sends still
// running (they fail at once on the closed connections).
func (c *Client) Close() error {
	c.mu.Lock()
	c.done = true
	for _, cc := range c.conns {
		_ = cc.Close()
	}
	c.conns = map[string]*grpc.ClientConn{}
	c.mu.Unlock()
	c.sends.wait()
	return nil
}

func (c *Client) rpc(addr string) (pb.RaftMQClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return nil, ErrClosed
	}
	cc, ok := c.conns[addr]
	if !ok {
		var err error
		opts := append([]grpc.DialOption{grpc.WithChainUnaryInterceptor(markNotSent)}, c.dial...)
		if cc, err = grpc.NewClient(addr, opts...); err != nil {
			return nil, fmt.Errorf("client: %s: %w", addr, err)
		}
		c.conns[addr] = cc
	}
	return pb.NewRaftMQClient(cc), nil
}

func (c *Client) endpoints() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.seeds...)
}

func (c *Client) leader() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lead
}

func (c *Client) setLeader(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lead = addr
	c.learn(addr)
}

// learn adds addr to the endpoints (mu held).
func (c *Client) learn(addr string) {
	if addr == "" {
		return
	}
	for _, s := range c.seeds {
		if s == addr {
			return
		}
	}
	c.seeds = append(c.seeds, addr)
}

// noLeaderError says every endpoint was probed; reached tells whether any
// answered, and first is the status of the first that did.
type noLeaderError struct {
	reached bool
	last    error
	first   *pb.StatusResponse
}

func (e *noLeaderError) Error() string {
	if e.reached {
		return "client: no leader known to any reachable node"
	}
	return fmt.Sprintf("client: no server reachable: %v", e.last)
}

func (e *noLeaderError) Unwrap() error { return ErrUnavailable }

func anyReached(err error) bool {
	e, ok := err.(*noLeaderError)
	return ok && e.reached
}

// resolve asks every endpoint for the leader and remembers it.
func (c *Client) resolve(ctx context.Context) (string, error) {
	nl := &noLeaderError{}
	for _, addr := range c.endpoints() {
		st, err := c.probe(ctx, addr)
		if refused(err) {
			return "", err
		}
		if err != nil {
			nl.last = err
			if ctx.Err() != nil {
				return "", ctxErr(ctx, err)
			}
			continue
		}
		if !nl.reached {
			nl.reached, nl.first = true, st
		}
		c.mu.Lock()
		for _, m := range st.GetMembers() {
			c.learn(m.GetApiAddr())
		}
		c.mu.Unlock()
		if l := st.GetLeaderApiAddr(); l != "" {
			c.setLeader(l)
			return l, nil
		}
	}
	return "", nl
}

func (c *Client) probe(ctx context.Context, addr string) (*pb.StatusResponse, error) {
	r, err := c.rpc(addr)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, c.opts.ProbeTimeout)
	defer cancel()
	return r.Status(pctx, &pb.StatusRequest{})
}

// write runs call on the leader, following leader changes while the error
// proves the request was not proposed. idempotent writes are also retried
// after an unknown outcome.
func (c *Client) write(ctx context.Context, idempotent bool, call func(context.Context, pb.RaftMQClient) error) error {
	var last error
	uncertain := false // an earlier try may have been applied
	r := c.newRetry()
	for attempt := 0; ; attempt++ {
		if err := r.before(ctx, attempt, last); err != nil {
			if uncertain {
				return fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
			}
			return err
		}
		addr := c.leader()
		if addr == "" {
			var err error
			if addr, err = c.resolve(ctx); refused(err) {
				return err
			} else if err != nil {
				last = err
				continue
			}
		}
		rc, err := c.rpc(addr)
		if err != nil {
			return err
		}
		err = c.attempt(ctx, rc, call)
		if err == nil {
			return nil
		}
		last = err
		safe := retrySafe(err)
		if !safe && !(idempotent && ctx.Err() == nil && transient(err)) {
			if transient(err) {
				// The leader may be gone: the next call finds the
				// leader again instead of failing on a dead one.
				c.forgetLeader(addr)
			}
			if uncertain && !transient(err) {
				// A refusal now says nothing of the earlier try.
				return fmt.Errorf("%w: %w", ErrOutcomeUnknown, classify(err, true))
			}
			return classify(err, true)
		}
		if !safe {
			uncertain = true
			c.resent.Add(1)
		}
		reason, hint := wire.RetryReason(err)
		if reason == wire.ReasonOverloaded {
			// The leader's queue was full: nothing was proposed. Same
			// leader, after the backoff.
			c.log.Debug("write refused: leader overloaded; backing off", "addr", addr, "error", err)
			continue
		}
		c.log.Debug("write not accepted; re-resolving leader", "addr", addr, "hint", hint, "error", err)
		c.setLeader(hint)
	}
}

// attempt runs one try of a write. A caller without a deadline still gets
// an answer: the try is bounded by RetryTimeout, after which its outcome is
// unknown (codes.DeadlineExceeded). A bench under load once saw a Send wait
// for its response headers for minutes on a connection whose server had no
// stream for it; nothing else would have ended that wait.
func (c *Client) attempt(ctx context.Context, rc pb.RaftMQClient, call func(context.Context, pb.RaftMQClient) error) error {
	if _, ok := ctx.Deadline(); ok {
		return call(ctx, rc)
	}
	actx, cancel := context.WithTimeout(ctx, c.opts.RetryTimeout)
	defer cancel()
	err := call(actx, rc)
	// The server may end the stream at the propagated deadline a moment
	// before actx's own timer fires: a DeadlineExceeded here is the bound,
	// since the caller set none.
	if err != nil && ctx.Err() == nil && (actx.Err() != nil || status.Code(err) == codes.DeadlineExceeded) {
		return status.Errorf(codes.DeadlineExceeded, "no answer within %v (Options.RetryTimeout; the call had no deadline): %v", c.opts.RetryTimeout, err)
	}
	return err
}

// read runs call on the leader (or any node with ReadFromAny), moving to
// another node when one is unavailable. Reads are always safe to retry.
func (c *Client) read(ctx context.Context, call func(context.Context, pb.RaftMQClient) error) error {
	var last error
	r := c.newRetry()
	for attempt := 0; ; attempt++ {
		if err := r.before(ctx, attempt, last); err != nil {
			return err
		}
		addr, err := c.readAddr(ctx, attempt)
		if refused(err) {
			return err
		}
		if err != nil {
			last = err
			continue
		}
		rc, err := c.rpc(addr)
		if err != nil {
			return err
		}
		err = call(ctx, rc)
		if err == nil {
			return nil
		}
		last = err
		if ctx.Err() != nil || !transient(err) {
			return classify(err, false)
		}
		c.forgetLeader(addr)
	}
}

// forgetLeader drops the known leader if it is still addr.
func (c *Client) forgetLeader(addr string) {
	if addr == c.leader() {
		c.setLeader("")
	}
}

// readAddr returns where try attempt of a read goes: the leader, resolved
// when none is known, or with ReadFromAny the endpoints in turn. A leader
// read never falls back to a follower: a follower may not yet have applied
// what the leader acknowledged, and a read from it after an acknowledged
// write would miss that write.
func (c *Client) readAddr(ctx context.Context, attempt int) (string, error) {
	if c.opts.ReadFromAny {
		eps := c.endpoints()
		return eps[attempt%len(eps)], nil
	}
	if l := c.leader(); l != "" {
		return l, nil
	}
	return c.resolve(ctx)
}

// maxPause caps the pause between tries. While a new leader is elected the
// pause is what a caller waits beyond the election (a 1 s cap made
// failovers last up to the next doubling: cluster-tests measured every
// failover at 1.56 s).
const maxPause = 250 * time.Millisecond

// retry is the time budget of one call: tries go on until the deadline
// (start + RetryTimeout) or the call's context ends, whichever is first.
type retry struct {
	backoff  time.Duration
	timeout  time.Duration
	deadline time.Time
}

func (c *Client) newRetry() *retry {
	return &retry{backoff: c.opts.Backoff, timeout: c.opts.RetryTimeout,
		deadline: time.Now().Add(c.opts.RetryTimeout)}
}

// jittered returns the pause before try attempt: the backoff doubled per
// try up to maxPause, then drawn uniformly from [d/2, d).
func jittered(backoff time.Duration, attempt int) time.Duration {
	d := min(backoff<<min(attempt-1, 16), maxPause)
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2)
}

// pause sleeps before try attempt. It returns ok=false when ctx ended or
// the budget ran out (expired), never sleeping past the deadline.
func (r *retry) pause(ctx context.Context, attempt int) (ok, expired bool) {
	left := time.Until(r.deadline)
	if left <= 0 {
		return false, true
	}
	d := min(jittered(r.backoff, attempt), left)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false, false
	case <-t.C:
		return true, false
	}
}

// before waits before try number attempt (none before the first) and
// returns why to stop instead: the retry budget ran out or ctx ended.
func (r *retry) before(ctx context.Context, attempt int, last error) error {
	if attempt == 0 {
		return nil
	}
	ok, expired := r.pause(ctx, attempt)
	switch {
	case ok:
		return nil
	case expired:
		return r.giveUp(attempt, last)
	}
	return ctxErr(ctx, last)
}

func (r *retry) giveUp(attempts int, last error) error {
	if last == nil {
		return fmt.Errorf("%w: still failing after %v (%d tries)", ErrUnavailable, r.timeout, attempts)
	}
	if reason, _ := wire.RetryReason(last); reason == wire.ReasonOverloaded {
		return fmt.Errorf("%w: still refused after %v (%d tries): %w", ErrOverloaded, r.timeout, attempts, last)
	}
	return fmt.Errorf("%w: still failing after %v (%d tries): %w", ErrUnavailable, r.timeout, attempts, last)
}
