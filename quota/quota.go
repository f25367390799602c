// Package quota paces each client's sends to a rate of messages and of
// body bytes per second, shared by every protocol a node speaks (the gRPC
// API and RocketMQ's remoting), so a client is one client whichever way it
// sends.
//
// A client is named by the caller: "user:NAME" for an authenticated
// principal, "ip:ADDR" without authentication. Each has a token bucket per
// rate (golang.org/x/time/rate) holding one second's worth, widened to
// hold at least one request. A send over the rate is held until its tokens
// come, up to MaxWait and within its deadline, so a steady client above
// its quota is slowed rather than failed; one that would wait longer gets
// ErrExceeded after RefusalDelay, so that a client resending at once
// cannot spin on refusals (a refusal costs the server a decode; one per
// RefusalDelay per connection-level sender is what a flood can make).
package quota

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// ErrExceeded is wrapped by every refusal.
var ErrExceeded = errors.New("quota exceeded")

// Config are the rates; zero turns one off.
type Config struct {
	MessagesPerSecond float64
	BytesPerSecond    float64
	// MaxWait bounds how long a send over the rate is held (default 1 s).
	MaxWait time.Duration
	// RefusalDelay holds a refusal this long before it is answered
	// (0: answer at once).
	RefusalDelay time.Duration
	// PerClient keeps a limiter without rates of its own: some clients
	// carry Rates (SendAt), the others are not limited.
	PerClient bool
}

// Enabled reports whether a rate is set.
func (c Config) Enabled() bool { return c.MessagesPerSecond > 0 || c.BytesPerSecond > 0 }

// Rates override Config's rates for one client (a user's own quota); zero
// keeps the configured rate.
type Rates struct {
	MessagesPerSecond float64
	BytesPerSecond    float64
}

// Limiter holds the clients' buckets. Its zero value is not usable; a nil
// *Limiter admits everything.
type Limiter struct {
	cfg       Config
	now       func() time.Time
	throttled atomic.Uint64
	refused   atomic.Uint64

	mu      sync.Mutex
	clients map[string]*buckets
}

type buckets struct {
	msgs, bytes *rate.Limiter
	seen        time.Time
}

// idleClient is how long an unused client's buckets are kept (a new
// client gets full buckets anyway); maxClients triggers the sweep.
const (
	idleClient = time.Minute
	maxClients = 4096
)

// New returns a limiter with cfg; now is its clock (nil: time.Now). It
// returns nil when no rate is set and cfg.PerClient is false.
func New(cfg Config, now func() time.Time) *Limiter {
	if !cfg.Enabled() && !cfg.PerClient {
		return nil
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = time.Second
	}
	if now == nil {
		now = time.Now
	}
	return &Limiter{cfg: cfg, now: now, clients: map[string]*buckets{}}
}

// Stats are the limiter's counters.
type Stats struct {
	Throttled uint64 // sends held until their client's rate allowed them
	Refused   uint64 // sends refused (ErrExceeded)
}

// Stats returns the counters (zero for a nil limiter).
func (l *Limiter) Stats() Stats {
	if l == nil {
		return Stats{}
	}
	return Stats{Throttled: l.throttled.Load(), Refused: l.refused.Load()}
}

// Send admits a send of n messages with size body bytes for client,
// holding it while its rate requires (see the package doc), or returns an
// error wrapping ErrExceeded, or ctx's error if ctx ends while held.
func (l *Limiter) Send(ctx context.Context, client string, n, size int) error {
	return l.SendAt(ctx, client, Rates{}, n, size)
}

// SendAt is Send for a client with rates of its own.
func (l *Limiter) SendAt(ctx context.Context, client string, own Rates, n, size int) error {
	if l == nil {
		return nil
	}
	rates := Rates{MessagesPerSecond: l.cfg.MessagesPerSecond, BytesPerSecond: l.cfg.BytesPerSecond}
	if own.MessagesPerSecond > 0 {
		rates.MessagesPerSecond = own.MessagesPerSecond
	}
	if own.BytesPerSecond > 0 {
		rates.BytesPerSecond = own.BytesPerSecond
	}
	now := l.now()
	b := l.buckets(client, rates, now, n, size)
	var wait time.Duration
	var held []*rate.Reservation
	for _, r := range []struct {
		lim  *rate.Limiter
		n    int
		rate float64
		what string
	}{{b.msgs, n, rates.MessagesPerSecond, "messages"}, {b.bytes, size, rates.BytesPerSecond, "body bytes"}} {
		if r.lim == nil {
			continue
		}
		res := r.lim.ReserveN(now, r.n)
		d := res.DelayFrom(now)
		if !res.OK() || d > l.cfg.MaxWait || !fits(ctx, d) {
			res.CancelAt(now)
			for _, h := range held {
				h.CancelAt(now)
			}
			l.refused.Add(1)
			sleep(ctx, l.cfg.RefusalDelay)
			return fmt.Errorf("%w: %s may send %.0f %s per second", ErrExceeded, client, r.rate, r.what)
		}
		held = append(held, res)
		wait = max(wait, d)
	}
	if wait <= 0 {
		return nil
	}
	l.throttled.Add(1)
	if !sleep(ctx, wait) {
		return ctx.Err()
	}
	return nil
}

// buckets returns client's buckets at rates (made, re-rated after a
// change, or widened to hold one request of n messages and size bytes).
func (l *Limiter) buckets(client string, rates Rates, now time.Time, n, size int) *buckets {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.clients[client]
	if b == nil {
		if len(l.clients) >= maxClients {
			l.sweep(now)
		}
		b = &buckets{}
		l.clients[client] = b
	}
	b.msgs = bucket(b.msgs, rates.MessagesPerSecond, now, n)
	b.bytes = bucket(b.bytes, rates.BytesPerSecond, now, size)
	b.seen = now
	return b
}

// bucket is lim at r per second holding at least n: a new client starts
// with a full bucket of a second's worth (at least its first request); a
// rate that changed is applied from now; r == 0 drops the bucket.
func bucket(lim *rate.Limiter, r float64, now time.Time, n int) *rate.Limiter {
	switch {
	case r <= 0:
		return nil
	case lim == nil:
		return rate.NewLimiter(rate.Limit(r), max(int(r), n, 1))
	}
	if lim.Limit() != rate.Limit(r) {
		lim.SetLimitAt(now, rate.Limit(r))
		lim.SetBurstAt(now, max(int(r), 1))
	}
	if lim.Burst() < n {
		lim.SetBurstAt(now, n)
	}
	return lim
}

func (l *Limiter) sweep(now time.Time) {
	for k, b := range l.clients {
		if now.Sub(b.seen) > idleClient {
			delete(l.clients, k)
		}
	}
}

func fits(ctx context.Context, d time.Duration) bool {
	dl, ok := ctx.Deadline()
	return !ok || time.Until(dl) > d
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
