package remoting

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testServer serves h on a loopback port; the server is closed when the
// test ends.
func testServer(t *testing.T, h Handler, opts Options) (*Server, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(h, opts)
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
		if err := <-served; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return s, l.Addr().String()
}

// rawClient is a connection that writes frames and reads answers by hand.
type rawClient struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
	mu sync.Mutex
}

func dial(t *testing.T, addr string) *rawClient {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawClient{t: t, nc: nc, r: bufio.NewReader(nc)}
}

func (c *rawClient) send(cmd *Command) {
	c.t.Helper()
	b, err := AppendFrame(nil, cmd)
	if err != nil {
		c.t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

func (c *rawClient) read() (*Command, error) {
	if err := c.nc.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return nil, err
	}
	return ReadCommand(c.r, DefaultMaxFrame)
}

// echo answers code 1 with the request's fields and body, and refuses
// every other code as not supported.
var echo = HandlerFunc(func(ctx context.Context, conn *Conn, req *Command) *Command {
	if req.Code != 1 {
		return req.NotSupported()
	}
	resp := req.Response(CodeSuccess, "")
	resp.ExtFields, resp.Body = req.ExtFields, req.Body
	return resp
})

// TestServerAnswersByOpaque: many requests in flight on one connection, in
// both header encodings, each answered once with its own opaque, fields and
// encoding; an unknown code gets REQUEST_CODE_NOT_SUPPORTED.
func TestServerAnswersByOpaque(t *testing.T) {
	_, addr := testServer(t, echo, Options{})
	c := dial(t, addr)
	const n = 200
	for i := 0; i < n; i++ {
		c.send(&Command{Code: 1, Opaque: int32(i), ExtFields: map[string]string{"i": string(rune('a' + i%26))},
			Body: []byte{byte(i)}, Serialize: Serialize(i % 2)})
	}
	c.send(&Command{Code: 999, Opaque: n, Serialize: SerializeRocketMQ})
	seen := map[int32]bool{}
	for len(seen) < n+1 {
		resp, err := c.read()
		if err != nil {
			t.Fatalf("after %d answers: %v", len(seen), err)
		}
		i := resp.Opaque
		switch {
		case !resp.IsResponse() || seen[i]:
			t.Fatalf("answer %v: not a response, or a second answer", resp)
		case i == n:
			if resp.Code != CodeRequestNotSupported || resp.Serialize != SerializeRocketMQ {
				t.Fatalf("unknown code answered %v", resp)
			}
		case resp.Code != CodeSuccess || resp.Serialize != Serialize(i%2) || resp.Field("i") != string(rune('a'+i%26)) ||
			len(resp.Body) != 1 || resp.Body[0] != byte(i):
			t.Fatalf("request %d answered %v %v", i, resp, resp.ExtFields)
		}
		seen[i] = true
	}
}

// TestServerOneway: a one-way request is served but not answered.
func TestServerOneway(t *testing.T) {
	onewayServed := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, conn *Conn, req *Command) *Command {
		if req.IsOneway() {
			close(onewayServed)
		}
		return echo(ctx, conn, req)
	})
	_, addr := testServer(t, h, Options{})
	c := dial(t, addr)
	c.send(&Command{Code: 1, Opaque: 1, Flag: FlagOneway})
	c.send(&Command{Code: 1, Opaque: 2})
	resp, err := c.read()
	if err != nil || resp.Opaque != 2 {
		t.Fatalf("first answer %v, %v: want the answer to opaque 2 only", resp, err)
	}
	select {
	case <-onewayServed:
	case <-time.After(10 * time.Second):
		t.Fatal("the one-way request was not served")
	}
}

// TestServerClosesUnframeableStreams: an oversized frame, a bad length or a
// malformed header closes the connection; the server keeps serving others.
func TestServerClosesUnframeableStreams(t *testing.T) {
	_, addr := testServer(t, echo, Options{MaxFrame: 1 << 16})
	for name, junk := range map[string][]byte{
		"oversized": be.AppendUint32(nil, 1<<20),
		"length 1":  be.AppendUint32(nil, 1),
		"bad JSON":  append(be.AppendUint32(be.AppendUint32(nil, 7), 3), '{', '{', '{'),
		"garbage":   []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
	} {
		c := dial(t, addr)
		if _, err := c.nc.Write(junk); err != nil {
			t.Fatal(err)
		}
		// Closed: EOF, or a reset when the server closed with bytes unread.
		if resp, err := c.read(); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("%s: read %v, %v; want the connection closed", name, resp, err)
		}
	}
	c := dial(t, addr)
	c.send(&Command{Code: 1, Opaque: 5})
	if resp, err := c.read(); err != nil || resp.Opaque != 5 {
		t.Fatalf("a good client after the bad ones: %v, %v", resp, err)
	}
}

// TestServerCloseEndsHandlers: Close cancels the context of a handler
// blocked in a long poll and returns once it did; nothing leaks (goleak).
func TestServerCloseEndsHandlers(t *testing.T) {
	entered := make(chan struct{})
	ended := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, conn *Conn, req *Command) *Command {
		close(entered)
		<-ctx.Done()
		close(ended)
		return nil
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(h, Options{})
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	c := dial(t, l.Addr().String())
	c.send(&Command{Code: 1, Opaque: 1})
	<-entered
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	default:
		t.Fatal("Close returned before the blocked handler ended")
	}
	if err := <-served; !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve: %v", err)
	}
	if err := s.Serve(l); !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve after Close: %v", err)
	}
}

// TestServerSendNotifies: a handler can push a request to its client
// (NOTIFY_CONSUMER_IDS_CHANGED) on the same connection, and the client's
// answer to it is ignored.
func TestServerSendNotifies(t *testing.T) {
	h := HandlerFunc(func(ctx context.Context, conn *Conn, req *Command) *Command {
		if err := conn.Send(&Command{Code: CodeNotifyConsumerIDs, Opaque: 77, Flag: FlagOneway,
			ExtFields: map[string]string{"consumerGroup": "g"}, Serialize: req.Serialize}); err != nil {
			t.Error(err)
		}
		return req.Response(CodeSuccess, "")
	})
	_, addr := testServer(t, h, Options{})
	c := dial(t, addr)
	c.send(&Command{Code: CodeHeartbeat, Opaque: 3})
	note, err := c.read()
	if err != nil || note.Code != CodeNotifyConsumerIDs || note.IsResponse() || note.Field("consumerGroup") != "g" {
		t.Fatalf("notification %v, %v", note, err)
	}
	c.send(&Command{Code: CodeSuccess, Opaque: 77, Flag: FlagResponse}) // the client's answer to it
	resp, err := c.read()
	if err != nil || resp.Opaque != 3 || !resp.IsResponse() {
		t.Fatalf("heartbeat answer %v, %v", resp, err)
	}
}
