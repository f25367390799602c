package remoting

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Handler answers requests. Serve is called on its own goroutine for each
// request, so it may block (a long-polling pull) until ctx ends, which
// happens when the connection or the server closes. It returns the answer,
// or nil for none; the answer to a one-way request is dropped. The server
// sets the answer's opaque and response flag.
type Handler interface {
	Serve(ctx context.Context, conn *Conn, req *Command) *Command
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, conn *Conn, req *Command) *Command

// Serve calls f.
func (f HandlerFunc) Serve(ctx context.Context, conn *Conn, req *Command) *Command {
	return f(ctx, conn, req)
}

// Options of a Server.
type Options struct {
	// MaxFrame bounds an incoming frame (default DefaultMaxFrame); a larger
	// one closes the connection.
	MaxFrame int
	// MaxInFlight bounds the requests of one connection being served at
	// once (default 256); reading stops until one finishes.
	MaxInFlight int
	// WriteTimeout bounds one write to a client (default 10 s): a client
	// that stops reading is disconnected.
	WriteTimeout time.Duration
	// Logger (default: none).
	Logger hclog.Logger
}

func (o Options) withDefaults() Options {
	if o.MaxFrame <= 0 {
		o.MaxFrame = DefaultMaxFrame
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 256
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	return o
}

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("remoting: server closed")

// Server serves the remoting protocol on the listeners given to Serve. Its
// Close stops them, closes every connection and waits for every goroutine
// it started.
type Server struct {
	h    Handler
	opts Options

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[*Conn]struct{}
}

// NewServer returns a server that hands requests to h.
func NewServer(h Handler, opts Options) *Server {
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{h: h, opts: opts.withDefaults(), ctx: ctx, cancel: cancel,
		listeners: map[net.Listener]struct{}{}, conns: map[*Conn]struct{}{}}
}

// Serve accepts connections on l until Close (then it returns
// ErrServerClosed) or until Accept fails.
func (s *Server) Serve(l net.Listener) error {
	if !s.track(l) {
		l.Close()
		return ErrServerClosed
	}
	defer s.untrack(l)
	for {
		nc, err := l.Accept()
		if err != nil {
			if s.isClosed() {
				return ErrServerClosed
			}
			return fmt.Errorf("remoting: accept: %w", err)
		}
		c := s.newConn(nc)
		if c == nil {
			nc.Close()
			return ErrServerClosed
		}
		go c.serve()
	}
}

func (s *Server) track(l net.Listener) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.listeners[l] = struct{}{}
	return true
}

func (s *Server) untrack(l net.Listener) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.listeners, l)
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Conns returns the open connections.
func (s *Server) Conns() []*Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Conn, 0, len(s.conns))
	for c := range s.conns {
		out = append(out, c)
	}
	return out
}

// Close stops accepting, closes every connection, cancels the handlers'
// contexts and waits until every goroutine of the server returned.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for l := range s.listeners {
		l.Close()
	}
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return nil
}

// Conn is one client connection. Its Send may be called from any goroutine.
type Conn struct {
	s      *Server
	nc     net.Conn
	ctx    context.Context
	cancel context.CancelFunc
	slots  chan struct{} // requests being served

	wmu sync.Mutex // serialises frames on the wire
	buf []byte
}

// newConn registers a connection; nil once the server closed.
func (s *Server) newConn(nc net.Conn) *Conn {
	ctx, cancel := context.WithCancel(s.ctx)
	c := &Conn{s: s, nc: nc, ctx: ctx, cancel: cancel, slots: make(chan struct{}, s.opts.MaxInFlight)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		cancel()
		return nil
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	return c
}

// RemoteAddr is the client's address.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// Context ends when the connection closes.
func (c *Conn) Context() context.Context { return c.ctx }

// Close closes the connection; its handlers' contexts end.
func (c *Conn) Close() error { return c.nc.Close() }

// serve reads requests until the stream ends or cannot be framed, serving
// each on its own goroutine, then waits for them.
func (c *Conn) serve() {
	var handlers sync.WaitGroup
	defer func() {
		c.nc.Close()
		c.cancel()
		handlers.Wait()
		c.s.mu.Lock()
		delete(c.s.conns, c)
		c.s.mu.Unlock()
		c.s.wg.Done()
	}()
	log := c.s.opts.Logger.With("remote", c.nc.RemoteAddr().String())
	r := bufio.NewReaderSize(c.nc, 64<<10)
	for {
		req, err := ReadCommand(r, c.s.opts.MaxFrame)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && c.ctx.Err() == nil {
				log.Warn("closing connection", "error", err)
			}
			return
		}
		if req.IsResponse() {
			continue // answers to what this server sent (notifications) are not awaited
		}
		select {
		case c.slots <- struct{}{}:
		case <-c.ctx.Done():
			return
		}
		handlers.Add(1)
		go func() {
			defer handlers.Done()
			defer func() { <-c.slots }()
			c.answer(req, log)
		}()
	}
}

// answer serves req and writes its answer.
func (c *Conn) answer(req *Command, log hclog.Logger) {
	resp := c.s.h.Serve(c.ctx, c, req)
	if resp == nil || req.IsOneway() {
		return
	}
	resp.Opaque, resp.Flag = req.Opaque, resp.Flag|FlagResponse
	err := c.Send(resp)
	if errors.Is(err, ErrEncode) {
		log.Error("answer cannot be encoded", "code", req.Code, "answer", resp.String(), "error", err)
		err = c.Send(req.Response(CodeSystemError, "the answer could not be encoded"))
	}
	if err != nil && c.ctx.Err() == nil {
		log.Warn("answer not sent", "code", req.Code, "opaque", req.Opaque, "error", err)
		c.nc.Close()
	}
}

// Send writes cmd to the client as one frame (a response, or a request
// such as NOTIFY_CONSUMER_IDS_CHANGED).
func (c *Conn) Send(cmd *Command) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	b, err := AppendFrame(c.buf[:0], cmd)
	if err != nil {
		return err
	}
	if cap(b) <= 1<<20 {
		c.buf = b
	}
	if err := c.nc.SetWriteDeadline(time.Now().Add(c.s.opts.WriteTimeout)); err != nil {
		return fmt.Errorf("remoting: write: %w", err)
	}
	if _, err := c.nc.Write(b); err != nil {
		return fmt.Errorf("remoting: write: %w", err)
	}
	return nil
}
