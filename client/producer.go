package client

import (
	"context"
	"sync"
	"time"
)

// DefaultMaxBatchBytes is ProducerOptions.MaxBatchBytes when unset: well
// below the 64 MiB gRPC message limit of client and server.
const DefaultMaxBatchBytes = 8 << 20

// ProducerOptions configure a Producer. Zero values take the defaults.
type ProducerOptions struct {
	MaxBatch int // messages per Send, default 128
	// MaxBatchBytes bounds the bytes of one Send (bodies, topic, id and
	// properties, see wireSize): a batch is cut before a message
	// that would take it over; a larger message is sent alone. Default
	// DefaultMaxBatchBytes. Messages given to SendAsync and not yet
	// answered are bounded to MaxBatchBytes × (MaxInFlight + 1): SendAsync
	// blocks beyond that.
	MaxBatchBytes int
	Linger        time.Duration // how long a partial batch waits for more, default 2 ms
	MaxInFlight   int           // concurrent Sends, default 4
	SendTimeout   time.Duration // per batch, default the client's RetryTimeout + 10 s
}

func (o *ProducerOptions) defaults(retry time.Duration) {
	if o.MaxBatch <= 0 {
		o.MaxBatch = 128
	}
	if o.MaxBatchBytes <= 0 {
		o.MaxBatchBytes = DefaultMaxBatchBytes
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
	msg  Message
	size int // wireSize(msg)
	cb   func(SendResult, error)
}

// Producer batches messages given to SendAsync into Sends of up to MaxBatch
// messages and MaxBatchBytes bytes, with up to MaxInFlight Sends outstanding. Every callback is
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
	bytes   int           // wireSize of the pending messages
	room    chan struct{} // closed when bytes drop; nil if nobody waits
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
// full (by messages, or by bytes: see MaxBatchBytes). After Close, cb gets
// ErrClosed at once.
func (p *Producer) SendAsync(msg Message, cb func(SendResult, error)) {
	if cb == nil {
		cb = func(SendResult, error) {}
	}
	size := wireSize(&msg)
	p.mu.Lock()
	p.waitRoom(size)
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
	p.bytes += size
	p.enq.Add(1)
	p.mu.Unlock()
	p.in <- pending{msg: msg, size: size, cb: cb}
	p.enq.Done()
}

// waitRoom waits (mu held, released while waiting) until size more bytes
// fit the bound on pending bytes, or the producer is closed. A message
// always fits when nothing is pending.
func (p *Producer) waitRoom(size int) {
	limit := p.opts.MaxBatchBytes * (p.opts.MaxInFlight + 1)
	for !p.closed && p.bytes > 0 && p.bytes+size > limit {
		if p.room == nil {
			p.room = make(chan struct{})
		}
		room := p.room
		p.mu.Unlock()
		<-room
		p.mu.Lock()
	}
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

// batcher is the batch the run loop is filling.
type batcher struct {
	p     *Producer
	msgs  []pending
	bytes int
}

// add appends m, first sending the batch if m would take it over
// MaxBatchBytes, and then if it is full; it reports whether a batch was
// sent.
func (b *batcher) add(m pending) bool {
	sent := false
	if len(b.msgs) > 0 && b.bytes+m.size > b.p.opts.MaxBatchBytes {
		sent = b.flush()
	}
	b.msgs = append(b.msgs, m)
	b.bytes += m.size
	if len(b.msgs) >= b.p.opts.MaxBatch || b.bytes >= b.p.opts.MaxBatchBytes {
		sent = b.flush() || sent
	}
	return sent
}

// flush sends the batch if it is not empty and reports whether it did.
func (b *batcher) flush() bool {
	if len(b.msgs) == 0 {
		return false
	}
	b.p.dispatch(b.msgs)
	b.msgs, b.bytes = nil, 0
	return true
}

func (p *Producer) run() {
	defer p.loop.Done()
	batch := &batcher{p: p}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case m := <-p.in:
			batch.add(m)
			if len(batch.msgs) == 1 {
				timer.Reset(p.opts.Linger)
			} else if len(batch.msgs) == 0 {
				timer.Stop()
			}
		case <-timer.C:
			batch.flush()
		case <-p.kick:
			p.drain(batch)
			batch.flush()
		case <-p.stop:
			p.drain(batch)
			batch.flush()
			return
		}
	}
}

// drain moves what is already queued into batches. On Close every
// SendAsync has finished queueing (enq) before stop is closed.
func (p *Producer) drain(batch *batcher) {
	for {
		select {
		case m := <-p.in:
			batch.add(m)
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
	bytes := 0
	for _, b := range batch {
		bytes += b.size
	}
	p.done(len(batch), bytes)
}

func (p *Producer) done(n, bytes int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending -= n
	p.bytes -= bytes
	if p.room != nil {
		close(p.room)
		p.room = nil
	}
	if p.pending == 0 {
		close(p.idle)
	}
}

// wireSize bounds from above what m adds to a SendRequest: body, topic,
// id, tag, keys and properties, and a margin for the protobuf framing.
func wireSize(m *Message) int {
	n := len(m.Body) + len(m.Topic) + len(m.Tag) + 32 + 64 // an id is 32 characters
	for _, k := range m.Keys {
		n += len(k) + 1
	}
	for k, v := range m.Properties {
		n += len(k) + len(v) + 8
	}
	return n
}
