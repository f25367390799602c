package remoting

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// ErrClientClosed is returned by Invoke once the client is closed or its
// connection failed.
var ErrClientClosed = errors.New("remoting: client closed")

// Client is one connection to a remoting server: Invoke sends a request and
// waits for the answer with its opaque. It is safe for concurrent use; its
// Close waits for its reader goroutine.
type Client struct {
	nc       net.Conn
	maxFrame int

	wmu sync.Mutex // serialises frames on the wire

	mu      sync.Mutex
	next    int32
	pending map[int32]chan *Command
	err     error // why the connection ended; set once
	done    chan struct{}
}

// Dial connects to a remoting server at addr in plaintext.
func Dial(ctx context.Context, addr string) (*Client, error) {
	return DialTLS(ctx, addr, nil)
}

// DialTLS connects to a remoting server at addr over TLS with cfg (nil:
// plaintext, as Dial). The handshake completes before it returns, within
// ctx; a cfg without ServerName checks the host of addr (unless cfg
// verifies peers itself, as tlsconf's peer configs do).
func DialTLS(ctx context.Context, addr string, cfg *tls.Config) (*Client, error) {
	var nc net.Conn
	var err error
	if cfg == nil {
		var d net.Dialer
		nc, err = d.DialContext(ctx, "tcp", addr)
	} else {
		d := tls.Dialer{Config: cfg}
		nc, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, fmt.Errorf("remoting: dial %s: %w", addr, err)
	}
	c := &Client{nc: nc, maxFrame: DefaultMaxFrame, pending: map[int32]chan *Command{}, done: make(chan struct{})}
	go c.read()
	return c, nil
}

// read delivers answers to their Invoke until the connection ends.
func (c *Client) read() {
	defer close(c.done)
	r := bufio.NewReaderSize(c.nc, 64<<10)
	for {
		cmd, err := ReadCommand(r, c.maxFrame)
		if err != nil {
			c.fail(err)
			return
		}
		if !cmd.IsResponse() {
			continue // requests from the server (notifications) are not served here
		}
		c.mu.Lock()
		ch, ok := c.pending[cmd.Opaque]
		delete(c.pending, cmd.Opaque)
		c.mu.Unlock()
		if ok {
			ch <- cmd // buffered: never blocks
		}
	}
}

// fail ends every pending Invoke with err (the first failure wins).
func (c *Client) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = fmt.Errorf("%w: %w", ErrClientClosed, err)
	}
	for op, ch := range c.pending {
		close(ch)
		delete(c.pending, op)
	}
}

// Invoke sends req (its opaque is set here) and waits for the answer, or
// returns nothing for a one-way request. ctx bounds the wait.
func (c *Client) Invoke(ctx context.Context, req *Command) (*Command, error) {
	ch := make(chan *Command, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, err
	}
	c.next++
	req.Opaque = c.next
	oneway := req.IsOneway()
	if !oneway {
		c.pending[req.Opaque] = ch
	}
	c.mu.Unlock()
	if err := c.write(ctx, req); err != nil {
		c.forget(req.Opaque)
		return nil, err
	}
	if oneway {
		return nil, nil
	}
	select {
	case resp, ok := <-ch:
		if !ok {
			c.mu.Lock()
			defer c.mu.Unlock()
			return nil, c.err
		}
		return resp, nil
	case <-ctx.Done():
		c.forget(req.Opaque)
		return nil, fmt.Errorf("remoting: code %d: %w", req.Code, ctx.Err())
	}
}

func (c *Client) forget(opaque int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pending, opaque)
}

func (c *Client) write(ctx context.Context, req *Command) error {
	b, err := AppendFrame(nil, req)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(10 * time.Second)
	}
	if err := c.nc.SetWriteDeadline(deadline); err != nil {
		return fmt.Errorf("remoting: write: %w", err)
	}
	if _, err := c.nc.Write(b); err != nil {
		c.nc.Close() // a partly written frame leaves the stream unframeable
		return fmt.Errorf("%w: write: %w", ErrClientClosed, err)
	}
	return nil
}

// Close closes the connection, fails what is pending and waits for the
// reader.
func (c *Client) Close() error {
	err := c.nc.Close()
	<-c.done
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
