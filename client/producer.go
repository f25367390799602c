package client

import (
	"context"
	"sync"
	"time"
)

// ProducerOptions configure a Producer. Zero values take the defaults.
type ProducerOptions struct {
	MaxBatch    int           // messages per Send, default 128
	Linger      time.Duration // how long a partial batch waits for more, default 2 ms
	MaxInFlight int           // concurrent Sends, default 4
	SendTimeout time.Duration // per batch, default the client's RetryTimeout + 10 s
}

func (o *ProducerOptions) defaults(retry time.Duration) {
	if o.MaxBatch <= 0 {
		o.MaxBatch = 128
	}
	if o.Linger <= 0 {
		o.Linger = 2 * time.Millisecond
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 4
	}
	if o.SendTimeout <= 0 {
		// Longer than the retry budget, so a batch that could not be sent
		// ends as ErrUnavailable (nothing stored), not as a deadline.
		o.SendTimeout = retry + 10*time.Second
	}
}

type pending struct {
	msg Message
	cb  func(SendResult, error)
}

// Producer batches messages given to SendAsync into Sends of up to MaxBatch
// messages, with up to MaxInFlight Sends outstanding. Every callback is
// called exactly once, from a producer goroutine. With MaxInFlight > 1,
// batches may complete out of order.
type Producer struct {
	c    *Client
	opts ProducerOptions
	in   chan pending
	kick chan struct{}
	sem  chan struct{}
	stop chan struct{}

	mu      sync.Mutex
	closed  bool
	pending int
	idle    chan struct{} // closed when pending drops to 0

	enq   sync.WaitGroup // SendAsync calls between the closed check and the queue
	loop  sync.WaitGroup
	sends sync.WaitGroup
}

// NewProducer starts a producer on c; Close it when done.
func NewProducer(c *Client, opts ProducerOptions) *Producer {
	opts.defaults(c.opts.RetryTimeout)
	p := &Producer{c: c, opts: opts, in: make(chan pending, opts.MaxBatch*opts.MaxInFlight),
		kick: make(chan struct{}, 1), sem: make(chan struct{}, opts.MaxInFlight),
		stop: make(chan struct{}), idle: make(chan struct{})}
	close(p.idle)
	p.loop.Add(1)
	go p.run()
	return p
}

// SendAsync queues msg; cb gets its result. It blocks while the queue is
// full. After Close, cb gets ErrClosed at once.
func (p *Producer) SendAsync(msg Message, cb func(SendResult, error)) {
	if cb == nil {
		cb = func(SendResult, error) {}
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		cb(SendResult{MsgID: msg.ID}, ErrClosed)
		return
	}
	if msg.ID == "" {
		msg.ID = p.c.ids.Next()
	}
	if p.pending == 0 {
		p.idle = make(chan struct{})
	}
	p.pending++
	p.enq.Add(1)
	p.mu.Unlock()
	p.in <- pending{msg: msg, cb: cb}
	p.enq.Done()
}

// Flush sends what is queued now and waits until every message given so
// far has its callback called, or ctx ends.
func (p *Producer) Flush(ctx context.Context) error {
	select {
	case p.kick <- struct{}{}:
	default:
	}
	p.mu.Lock()
	idle := p.idle
	p.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close sends everything queued, waits for all callbacks and stops.
func (p *Producer) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	p.enq.Wait()
	close(p.stop)
	p.loop.Wait()
	p.sends.Wait()
	return nil
}

func (p *Producer) run() {
	defer p.loop.Done()
	var batch []pending
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	flush := func() {
		if len(batch) > 0 {
			p.dispatch(batch)
			batch = nil
		}
	}
	for {
		select {
		case m := <-p.in:
			if len(batch) == 0 {
				timer.Reset(p.opts.Linger)
			}
			batch = append(batch, m)
			if len(batch) >= p.opts.MaxBatch {
				timer.Stop()
				flush()
			}
		case <-timer.C:
			flush()
		case <-p.kick:
			p.drain(&batch)
			flush()
		case <-p.stop:
			p.drain(&batch)
			flush()
			return
		}
	}
}

// drain moves what is already queued into batches. On Close every
// SendAsync has finished queueing (enq) before stop is closed.
func (p *Producer) drain(batch *[]pending) {
	for {
		select {
		case m := <-p.in:
			*batch = append(*batch, m)
			if len(*batch) >= p.opts.MaxBatch {
				p.dispatch(*batch)
				*batch = nil
			}
		default:
			return
		}
	}
}

func (p *Producer) dispatch(batch []pending) {
	p.sem <- struct{}{}
	p.sends.Add(1)
	go func() {
		defer p.sends.Done()
		defer func() { <-p.sem }()
		p.send(batch)
	}()
}

func (p *Producer) send(batch []pending) {
	ctx, cancel := context.WithTimeout(context.Background(), p.opts.SendTimeout)
	defer cancel()
	msgs := make([]Message, len(batch))
	for i, b := range batch {
		msgs[i] = b.msg
	}
	res, err := p.c.Send(ctx, msgs...)
	for i, b := range batch {
		if err != nil {
			b.cb(SendResult{MsgID: b.msg.ID, Topic: b.msg.Topic}, err)
		} else {
			b.cb(res[i], res[i].Err)
		}
	}
	p.done(len(batch))
}

func (p *Producer) done(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending -= n
	if p.pending == 0 {
		close(p.idle)
	}
}
