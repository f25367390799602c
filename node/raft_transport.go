package node

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
)

// RaftTransport is Raft's TCP transport: hashicorp/raft's NetworkTransport
// for every RPC and for serving, plus a pipelined AppendEntries of our own
// (raftPipeline) that cannot stall.
//
// Why not the upstream pipeline. hashicorp/raft v1.8's netPipeline can
// deadlock (hashicorp/raft #612; the fix, PR #683, is not merged): with the
// default MaxRPCsInFlight its channels are unbuffered, and when a follower
// answers Success=false Raft's pipelineDecode returns and nobody reads the
// pipeline's Consumer again. Its decode goroutine then parks delivering the
// next response, and the next send parks handing its future to that
// goroutine. The follower's replication goroutine never returns: heartbeats
// still flow, so the follower never calls an election, yet it receives no
// entry again, and Raft.Shutdown waits for it forever (found by
// cluster-tests as a 20 s hung graceful stop).
//
// Why this choice: a transport of our own around NetworkTransport, rather
// than upstream's fix (PR #683) applied to raftmq's hashicorp/raft fork
// (third_party/raft, which carries other patches; see its FORK.md). The
// pipeline is only a client: it speaks NetworkTransport's wire format (one
// type byte, then the msgpack request; the answer is a msgpack error string
// and the msgpack response) on a connection of its own, and the follower's
// NetworkTransport serves it like any other connection. So the serving side
// and every other RPC stay v1.8.0's code, and the fork stays small. What differs from netPipeline:
//
//   - A failed exchange fails the pipeline: a response with Success=false or
//     a newer term (Raft stops reading the Consumer on those), a remote
//     error, or any I/O error. From then on AppendEntries returns an error
//     at once, including a send already waiting for a slot, so Raft leaves
//     pipeline mode and falls back to synchronous AppendEntries, which
//     handles the rejection (it walks nextIndex back).
//   - At most Raft.MaxRPCsInFlight requests are sent and unanswered (a
//     slot per request); the decoder frees a request's slot before it hands
//     the answer on, and the answer queue holds MaxRPCsInFlight, so no send
//     waits on a hand-off, only on a slot, a failure or Close.
//   - Close closes the connection, waits for the decode goroutine and fails
//     every future not yet answered. RaftTransport.Close closes every
//     connection the transport dialed or accepted (raftStream), its own and
//     NetworkTransport's, then every open pipeline: an RPC waiting for a
//     follower that stopped answering is released at once instead of after
//     the transport timeout, so Raft.Shutdown returns promptly.
//
// Raft.MaxRPCsInFlight < 2 turns pipelining off (Raft then sends one
// AppendEntries at a time per follower, each with up to MaxAppendEntries
// entries). The bench ceiling uses the same transport, so the comparison
// stays fair.
type RaftTransport struct {
	*raft.NetworkTransport
	stream      *raftStream
	log         hclog.Logger
	timeout     time.Duration
	maxInFlight int

	mu        sync.Mutex
	closed    bool
	pipelines map[*raftPipeline]struct{}
	stats     map[raft.ServerAddress]*pipelineCounters
}

// PipelineStats counts the pipelined replication to one follower address.
type PipelineStats struct {
	Opened   uint64 // pipelines opened (Raft enters pipeline mode)
	Sent     uint64 // AppendEntries RPCs sent (or being written) on a pipeline
	Answered uint64 // of those, answered (successfully or not)
	Failed   uint64 // pipelines that failed (rejection, remote or I/O error)
	// InFlight counts the RPCs sent (or being written) on the open
	// pipelines and not yet answered now: at most MaxRPCsInFlight.
	InFlight uint64
	// Pending counts the pipelined AppendEntries calls in progress now:
	// waiting for one of MaxRPCsInFlight slots, or writing.
	Pending uint64
}

type pipelineCounters struct {
	opened, sent, answered, failed atomic.Uint64
	pending                        atomic.Int64
}

// ErrPipelineFailed is returned by a pipelined AppendEntries after an
// earlier request on the same pipeline failed; Raft then replicates to that
// follower synchronously until it is healthy again.
var ErrPipelineFailed = errors.New("node: raft pipeline failed")

// rpcAppendEntries is NetworkTransport's wire type byte for AppendEntries
// (the first constant of its iota block in net_transport.go).
const rpcAppendEntries uint8 = 0

// Buffer sizes as NetworkTransport's (connSendBufferSize).
const pipelineSendBuffer = 256 << 10

// NewRaftTransport listens on cfg.RaftAddr in plain TCP.
func NewRaftTransport(cfg Config, logger hclog.Logger) (*RaftTransport, error) {
	return NewRaftTransportTLS(cfg, logger, nil, nil)
}

// NewRaftTransportTLS listens on cfg.RaftAddr; with server and client set
// every connection is TLS: accepted ones with server (which should require
// a client certificate), dialed ones with client (see raftStream).
func NewRaftTransportTLS(cfg Config, logger hclog.Logger, server, client *tls.Config) (*RaftTransport, error) {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	stream, err := listenRaft(cfg.RaftAddr, server, client)
	if err != nil {
		return nil, err
	}
	t := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: stream, MaxPool: cfg.Raft.MaxPool, Timeout: cfg.Raft.TransportTimeout, Logger: logger,
		// NetworkTransport's own pipeline is never used (see
		// AppendEntriesPipeline); 1 makes that explicit.
		MaxRPCsInFlight: 1,
	})
	return &RaftTransport{
		NetworkTransport: t,
		stream:           stream,
		log:              logger,
		timeout:          cfg.Raft.TransportTimeout,
		maxInFlight:      cfg.Raft.MaxRPCsInFlight,
		pipelines:        make(map[*raftPipeline]struct{}),
		stats:            make(map[raft.ServerAddress]*pipelineCounters),
	}, nil
}

// TLSHandshakeFailures counts the Raft connections, dialed or accepted,
// whose TLS handshake failed (a peer without a certificate of the cluster
// CA, or one that refuses ours).
func (t *RaftTransport) TLSHandshakeFailures() uint64 { return t.stream.handshakeFailures.Load() }

// AppendEntriesPipeline opens a pipeline to target on a new connection, or
// returns raft.ErrPipelineReplicationNotSupported when MaxRPCsInFlight < 2.
func (t *RaftTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	if t.maxInFlight < 2 {
		return nil, raft.ErrPipelineReplicationNotSupported
	}
	if t.IsShutdown() {
		return nil, raft.ErrTransportShutdown
	}
	conn, err := t.stream.Dial(target, t.timeout)
	if err != nil {
		return nil, fmt.Errorf("node: raft pipeline to %s (%s): %w", id, target, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		_ = conn.Close()
		return nil, raft.ErrTransportShutdown
	}
	c := t.stats[target]
	if c == nil {
		c = new(pipelineCounters)
		t.stats[target] = c
	}
	p := newRaftPipeline(t, conn, id, target, c)
	t.pipelines[p] = struct{}{}
	c.opened.Add(1)
	return p, nil
}

// PipelineStats reports the pipelined replication to target so far.
func (t *RaftTransport) PipelineStats(target raft.ServerAddress) PipelineStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.stats[target]
	if c == nil {
		return PipelineStats{}
	}
	var inFlight int
	for p := range t.pipelines {
		if p.target == target {
			inFlight += len(p.slots)
		}
	}
	return PipelineStats{
		Opened: c.opened.Load(), Sent: c.sent.Load(), Answered: c.answered.Load(),
		Failed: c.failed.Load(), InFlight: uint64(inFlight), Pending: uint64(c.pending.Load()),
	}
}

// Close closes the NetworkTransport and every connection it or a pipeline
// dialed or accepted, so no RPC in flight holds Raft.Shutdown until the
// transport timeout, then closes the open pipelines and waits for their
// goroutines.
func (t *RaftTransport) Close() error {
	t.mu.Lock()
	t.closed = true
	open := make([]*raftPipeline, 0, len(t.pipelines))
	for p := range t.pipelines {
		open = append(open, p)
	}
	t.mu.Unlock()
	err := t.NetworkTransport.Close() // closes t.stream
	for _, p := range open {
		_ = p.Close()
	}
	return err
}

func (t *RaftTransport) forget(p *raftPipeline) {
	t.mu.Lock()
	delete(t.pipelines, p)
	t.mu.Unlock()
}

// raftPipeline is one pipelined AppendEntries stream to a follower. Raft
// calls AppendEntries from one goroutine and reads Consumer from another;
// the decode goroutine reads the answers in order.
type raftPipeline struct {
	trans  *RaftTransport
	id     raft.ServerID
	target raft.ServerAddress
	conn   net.Conn
	w      *bufio.Writer
	enc    *codec.Encoder
	dec    *codec.Decoder
	stats  *pipelineCounters
	log    hclog.Logger

	sendMu   sync.Mutex             // one send at a time; held while failing leftovers
	slots    chan struct{}          // a token per request sent and not yet answered
	inflight chan *appendFuture     // sent, in order, not yet taken by decode
	done     chan raft.AppendFuture // answered; Raft's pipelineDecode reads it
	failed   chan struct{}          // closed by the first failure
	failErr  error                  // written once before failed is closed
	failOnce sync.Once

	closed    chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
}

func newRaftPipeline(t *RaftTransport, conn net.Conn, id raft.ServerID, target raft.ServerAddress, c *pipelineCounters) *raftPipeline {
	w := bufio.NewWriterSize(conn, pipelineSendBuffer)
	// NetworkTransport's default encoding (MsgpackUseNewTimeFormat false).
	enc := &codec.MsgpackHandle{}
	enc.TimeNotBuiltin = true
	n := t.maxInFlight
	p := &raftPipeline{
		trans: t, id: id, target: target, conn: conn, w: w, stats: c,
		enc:      codec.NewEncoder(w, enc),
		dec:      codec.NewDecoder(bufio.NewReader(conn), &codec.MsgpackHandle{}),
		log:      t.log.With("peer", id, "address", target),
		slots:    make(chan struct{}, n),
		inflight: make(chan *appendFuture, n),
		done:     make(chan raft.AppendFuture, n),
		failed:   make(chan struct{}),
		closed:   make(chan struct{}),
	}
	p.wg.Add(1)
	go p.decodeLoop()
	return p
}

// AppendEntries sends args and returns its future. It waits while
// MaxRPCsInFlight requests are unanswered, and returns an error at once if
// the pipeline failed or was closed, even while waiting.
func (p *raftPipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	p.stats.pending.Add(1)
	defer p.stats.pending.Add(-1)
	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	if err := p.stopped(); err != nil {
		return nil, err
	}
	if err := p.acquire(); err != nil {
		return nil, err
	}
	f := &appendFuture{start: time.Now(), args: args, resp: resp, ch: make(chan struct{})}
	p.stats.sent.Add(1)
	if err := p.send(args); err != nil {
		<-p.slots
		p.fail(fmt.Errorf("send: %w", err))
		return nil, p.stopped()
	}
	p.inflight <- f // never blocks: len(inflight) <= len(slots) <= cap
	return f, nil
}

// acquire takes an in-flight slot, waiting while there is none unless the
// pipeline fails or closes meanwhile.
func (p *raftPipeline) acquire() error {
	select {
	case p.slots <- struct{}{}:
		return nil
	case <-p.failed:
		return p.stopped()
	case <-p.closed:
		return raft.ErrPipelineShutdown
	}
}

func (p *raftPipeline) send(args *raft.AppendEntriesRequest) error {
	if p.trans.timeout > 0 {
		_ = p.conn.SetWriteDeadline(time.Now().Add(p.trans.timeout))
	}
	if err := p.w.WriteByte(rpcAppendEntries); err != nil {
		return err
	}
	if err := p.enc.Encode(args); err != nil {
		return err
	}
	return p.w.Flush()
}

// stopped is nil while the pipeline takes requests, else why it does not.
func (p *raftPipeline) stopped() error {
	select {
	case <-p.closed:
		return raft.ErrPipelineShutdown
	default:
	}
	select {
	case <-p.failed:
		return fmt.Errorf("%w: %s (%s): %w", ErrPipelineFailed, p.id, p.target, p.failErr)
	default:
		return nil
	}
}

// fail stops the pipeline taking requests and closes its connection: the
// answers still due are of no use, since Raft stops reading Consumer at the
// first failed one.
func (p *raftPipeline) fail(err error) {
	p.failOnce.Do(func() {
		p.failErr = err
		close(p.failed)
		p.stats.failed.Add(1)
		_ = p.conn.Close()
		p.log.Debug("raft pipeline failed; raft falls back to synchronous replication", "error", err)
	})
}

func (p *raftPipeline) decodeLoop() {
	defer p.wg.Done()
	defer p.failLeftovers()
	for {
		var f *appendFuture
		select {
		case f = <-p.inflight:
		case <-p.closed:
			return
		}
		err := p.receive(f.resp)
		switch {
		case err != nil:
			p.fail(err)
		case !f.resp.Success:
			p.fail(fmt.Errorf("rejected (term %d, follower last index %d)", f.resp.Term, f.resp.LastLog))
		case f.resp.Term > f.args.Term:
			p.fail(fmt.Errorf("follower has newer term %d > %d", f.resp.Term, f.args.Term))
		}
		p.stats.answered.Add(1)
		f.respond(err)
		<-p.slots
		select {
		case p.done <- f:
		case <-p.closed:
			return
		}
	}
}

// receive decodes one answer: NetworkTransport sends an error string, then
// the response.
func (p *raftPipeline) receive(resp *raft.AppendEntriesResponse) error {
	if p.trans.timeout > 0 {
		_ = p.conn.SetReadDeadline(time.Now().Add(p.trans.timeout))
	}
	var rpcErr string
	if err := p.dec.Decode(&rpcErr); err != nil {
		return fmt.Errorf("receive: %w", err)
	}
	if err := p.dec.Decode(resp); err != nil {
		return fmt.Errorf("receive: %w", err)
	}
	if rpcErr != "" {
		return fmt.Errorf("follower: %s", rpcErr)
	}
	return nil
}

// failLeftovers answers every future sent but not decoded with
// ErrPipelineShutdown. It holds sendMu so no send adds one behind it: a
// send blocked in a write is released by Close closing the connection.
func (p *raftPipeline) failLeftovers() {
	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	for {
		select {
		case f := <-p.inflight:
			f.respond(raft.ErrPipelineShutdown)
		default:
			return
		}
	}
}

// Consumer returns the answered futures, in the order they were sent.
func (p *raftPipeline) Consumer() <-chan raft.AppendFuture { return p.done }

// Close closes the connection and waits for the decode goroutine.
func (p *raftPipeline) Close() error {
	p.closeOnce.Do(func() {
		close(p.closed)
		_ = p.conn.Close()
		p.trans.forget(p)
	})
	p.wg.Wait()
	return nil
}

// appendFuture is a raft.AppendFuture answered by the decode goroutine.
type appendFuture struct {
	start time.Time
	args  *raft.AppendEntriesRequest
	resp  *raft.AppendEntriesResponse
	err   error
	ch    chan struct{}
}

func (f *appendFuture) respond(err error) {
	f.err = err
	close(f.ch)
}

// Error waits for the answer.
func (f *appendFuture) Error() error {
	<-f.ch
	return f.err
}

func (f *appendFuture) Start() time.Time                      { return f.start }
func (f *appendFuture) Request() *raft.AppendEntriesRequest   { return f.args }
func (f *appendFuture) Response() *raft.AppendEntriesResponse { return f.resp }

// raftStream is NetworkTransport's TCP stream layer (raft.TCPStreamLayer)
// that also tracks the connections it dials and accepts, and closes them
// when it is closed. NetworkTransport.Close only closes the listener: an RPC
// waiting for a follower that stopped answering (a synchronous
// AppendEntries, an InstallSnapshot) would otherwise hold Raft.Shutdown
// until its deadline, and each accepted connection's handler would live on
// until the peer hangs up.
type raftStream struct {
	lis *net.TCPListener
	// serverTLS and clientTLS, when set, make every accepted and dialed
	// connection mutual TLS; handshakeFailures counts those that failed.
	serverTLS, clientTLS *tls.Config
	handshakeFailures    atomic.Uint64

	mu     sync.Mutex
	closed bool
	conns  map[*streamConn]struct{}
}

// tlsHandshakeTimeout bounds an accepted connection's TLS handshake.
const tlsHandshakeTimeout = 10 * time.Second

func listenRaft(addr string, serverTLS, clientTLS *tls.Config) (*raftStream, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	tl := l.(*net.TCPListener)
	// As raft.NewTCPTransport: peers must be able to dial what we advertise.
	if a := tl.Addr().(*net.TCPAddr); a.IP == nil || a.IP.IsUnspecified() {
		_ = l.Close()
		return nil, fmt.Errorf("%w: raft address %s is not advertisable", ErrConfig, addr)
	}
	return &raftStream{lis: tl, serverTLS: serverTLS, clientTLS: clientTLS, conns: make(map[*streamConn]struct{})}, nil
}

// Dial implements raft.StreamLayer. With TLS the handshake completes here,
// so a peer whose certificate is refused (or that refuses ours) fails the
// dial: Raft sees an unreachable follower and sends it nothing.
func (s *raftStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", string(address), timeout)
	if err != nil {
		return nil, err
	}
	if s.clientTLS != nil {
		tc := tls.Client(c, s.clientTLS)
		_ = tc.SetDeadline(time.Now().Add(timeout))
		if err := tc.Handshake(); err != nil {
			s.handshakeFailures.Add(1)
			_ = c.Close()
			return nil, fmt.Errorf("node: raft TLS handshake with %s: %w", address, err)
		}
		_ = tc.SetDeadline(time.Time{})
		c = tc
	}
	return s.track(c, false)
}

// Accept implements net.Listener. A TLS connection's handshake runs on its
// first Read (on NetworkTransport's handler goroutine, not the accept loop).
func (s *raftStream) Accept() (net.Conn, error) {
	for {
		c, err := s.lis.Accept()
		if err != nil {
			return nil, err
		}
		if s.serverTLS != nil {
			c = tls.Server(c, s.serverTLS)
		}
		if tc, err := s.track(c, true); err == nil {
			return tc, nil
		}
	}
}

func (s *raftStream) track(c net.Conn, accepted bool) (net.Conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		_ = c.Close()
		return nil, raft.ErrTransportShutdown
	}
	sc := &streamConn{Conn: c, s: s, accepted: accepted}
	s.conns[sc] = struct{}{}
	return sc, nil
}

// Close closes the listener and every tracked connection.
func (s *raftStream) Close() error {
	s.mu.Lock()
	s.closed = true
	conns := s.conns
	s.conns = make(map[*streamConn]struct{})
	s.mu.Unlock()
	err := s.lis.Close()
	for c := range conns {
		_ = c.Conn.Close()
	}
	return err
}

// Addr implements net.Listener.
func (s *raftStream) Addr() net.Addr { return s.lis.Addr() }

type streamConn struct {
	net.Conn
	s         *raftStream
	accepted  bool
	handshake sync.Once
	hsErr     error
}

// Read reports a read that failed because the stream was closed as io.EOF
// on an accepted connection: NetworkTransport's handler then ends quietly,
// as when the peer hangs up, instead of logging an error per connection.
// An accepted TLS connection first completes its handshake, bounded by
// tlsHandshakeTimeout, and counts a failure.
func (c *streamConn) Read(p []byte) (int, error) {
	if tc, ok := c.Conn.(*tls.Conn); ok && c.accepted {
		c.handshake.Do(func() {
			_ = tc.SetDeadline(time.Now().Add(tlsHandshakeTimeout))
			if c.hsErr = tc.Handshake(); c.hsErr != nil {
				c.s.handshakeFailures.Add(1)
			}
			_ = tc.SetDeadline(time.Time{})
		})
		if c.hsErr != nil {
			return 0, c.hsErr
		}
	}
	n, err := c.Conn.Read(p)
	if err != nil && c.accepted && c.s.isClosed() {
		err = io.EOF
	}
	return n, err
}

func (s *raftStream) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (c *streamConn) Close() error {
	c.s.mu.Lock()
	delete(c.s.conns, c)
	c.s.mu.Unlock()
	return c.Conn.Close()
}
