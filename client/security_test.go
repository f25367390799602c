package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
	"github.com/raftmq/raftmq/tlsconf"
)

// authServer is a gRPC server with the raftmq API (Status and ListTopics)
// and the health service; it records the authorization metadata and the
// client certificate's name of every call, and with want set refuses calls
// without "Bearer <want>".
type authServer struct {
	pb.UnimplementedRaftMQServer
	addr string
	want string

	mu    sync.Mutex
	calls []seenCall
}

// seenCall is what the server saw of one call.
type seenCall struct {
	method, authorization, certCN, userAgent string
}

func (s *authServer) Status(context.Context, *pb.StatusRequest) (*pb.StatusResponse, error) {
	return &pb.StatusResponse{LeaderApiAddr: s.addr}, nil
}

func (s *authServer) ListTopics(context.Context, *pb.ListTopicsRequest) (*pb.ListTopicsResponse, error) {
	return &pb.ListTopicsResponse{}, nil
}

// see records a call and checks its token.
func (s *authServer) see(ctx context.Context, method string) error {
	md, _ := metadata.FromIncomingContext(ctx)
	c := seenCall{method: method, authorization: strings.Join(md.Get("authorization"), ","),
		userAgent: strings.Join(md.Get("user-agent"), ",")}
	if p, ok := peer.FromContext(ctx); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			c.certCN = tlsconf.PeerName(&ti.State)
		}
	}
	s.mu.Lock()
	s.calls = append(s.calls, c)
	s.mu.Unlock()
	if s.want != "" && c.authorization != "Bearer "+s.want {
		return status.Error(codes.Unauthenticated, "bad or no token")
	}
	return nil
}

func (s *authServer) seen() []seenCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seenCall(nil), s.calls...)
}

// serveAuth starts an authServer, with TLS when cfg is set.
func serveAuth(t *testing.T, cfg *tls.Config, want string) *authServer {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &authServer{addr: lis.Addr().String(), want: want}
	opts := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := s.see(ctx, info.FullMethod); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := s.see(ss.Context(), info.FullMethod); err != nil {
				return err
			}
			return h(srv, ss)
		}),
	}
	if cfg != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg)))
	}
	g := grpc.NewServer(opts...)
	pb.RegisterRaftMQServer(g, s)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(g, hs)
	done := make(chan error, 1)
	go func() { done <- g.Serve(lis) }()
	t.Cleanup(func() {
		hs.Shutdown()
		g.Stop()
		<-done
	})
	return s
}

// pki is a CA and the files of a server and a client certificate it issued.
type pki struct {
	caFile                string
	server                tls.Certificate
	clientCert, clientKey string
	pool                  *x509.CertPool
}

// newPKI makes a CA and issues a server certificate for hosts and a client
// certificate named "orders-service", all in a temp dir.
func newPKI(t *testing.T, hosts ...string) pki {
	t.Helper()
	dir := t.TempDir()
	ca, err := tlsconf.NewAuthority("test CA", time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	caFile, _, err := ca.WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(cn string, hosts []string) tlsconf.Leaf {
		l, err := ca.Issue(cn, hosts, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	srv := issue("n1", hosts)
	cert, err := tls.X509KeyPair(srv.CertPEM, srv.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	clientCert, clientKey, err := issue("orders-service", nil).WriteFiles(dir, "orders-service")
	if err != nil {
		t.Fatal(err)
	}
	pool, err := tlsconf.LoadPool(caFile)
	if err != nil {
		t.Fatal(err)
	}
	return pki{caFile: caFile, server: cert, clientCert: clientCert, clientKey: clientKey, pool: pool}
}

// serverTLS serves p's server certificate and verifies a client
// certificate when one is given.
func (p pki) serverTLS() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{p.server},
		ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: p.pool}
}

// A client with the CA and a client certificate connects over TLS; its
// token and its certificate's name reach the server on every call, unary
// and streaming, and DialOptions still apply.
func TestTLSWithTokenAndClientCert(t *testing.T) {
	p := newPKI(t, "127.0.0.1", "localhost")
	s := serveAuth(t, p.serverTLS(), "s3cret-token")
	cfg, err := tlsconf.ClientConfig(p.caFile, p.clientCert, p.clientKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(testCtx(t), []string{s.addr}, Options{TLS: cfg, Token: "s3cret-token",
		DialOptions: []grpc.DialOption{grpc.WithUserAgent("raftmq-test-agent")}})
	if err != nil {
		t.Fatalf("New over TLS: %v", err)
	}
	defer c.Close()
	if _, err := c.ListTopics(testCtx(t)); err != nil {
		t.Fatalf("ListTopics over TLS: %v", err)
	}
	watchHealth(t, c, s.addr)

	calls := s.seen()
	methods := map[string]bool{}
	for _, call := range calls {
		methods[call.method] = true
		if call.authorization != "Bearer s3cret-token" || call.certCN != "orders-service" ||
			!strings.Contains(call.userAgent, "raftmq-test-agent") {
			t.Errorf("server saw %+v", call)
		}
	}
	for _, m := range []string{"/raftmq.v1.RaftMQ/Status", "/raftmq.v1.RaftMQ/ListTopics", "/grpc.health.v1.Health/Watch"} {
		if !methods[m] {
			t.Errorf("no call to %s among %+v", m, calls)
		}
	}
}

// watchHealth opens a streaming call on the client's own connection to
// addr and reads one answer.
func watchHealth(t *testing.T, c *Client, addr string) {
	t.Helper()
	c.mu.Lock()
	cc := c.conns[addr]
	c.mu.Unlock()
	if cc == nil {
		t.Fatalf("no connection to %s", addr)
	}
	ctx, cancel := context.WithTimeout(testCtx(t), 5*time.Second)
	defer cancel()
	w, err := healthpb.NewHealthClient(cc).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Recv(); err != nil {
		t.Fatalf("health watch: %v", err)
	}
}

// A client that trusts another CA, or dials a host the certificate does
// not name, fails the handshake: codes.Unavailable, nothing reaches the
// server.
func TestTLSRefusesUntrustedServer(t *testing.T) {
	p := newPKI(t, "127.0.0.1")
	s := serveAuth(t, p.serverTLS(), "")
	named := newPKI(t, "node1.example")
	sNamed := serveAuth(t, named.serverTLS(), "")
	other := newPKI(t, "127.0.0.1")
	clientTLS := func(caFile string) *tls.Config {
		cfg, err := tlsconf.ClientConfig(caFile, "", "")
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	for _, tc := range []struct {
		name, addr string
		cfg        *tls.Config
		want       string
	}{
		{"wrong CA", s.addr, clientTLS(other.caFile), "certificate signed by unknown authority"},
		{"wrong host", sNamed.addr, clientTLS(named.caFile), "127.0.0.1"},
	} {
		opts := Options{TLS: tc.cfg, RetryTimeout: time.Second}
		_, err := New(testCtx(t), []string{tc.addr}, opts)
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New: %v, want ErrUnavailable mentioning %q", tc.name, err, tc.want)
		}
		if code := status.Code(statusCall(t, opts, tc.addr)); code != codes.Unavailable {
			t.Errorf("%s: call ended with %v, want Unavailable", tc.name, code)
		}
	}
	if n := len(s.seen()) + len(sNamed.seen()); n != 0 {
		t.Fatalf("%d calls reached the servers through failed handshakes", n)
	}
	// The right CA and host: the same server answers.
	if err := statusCall(t, Options{TLS: clientTLS(p.caFile)}, s.addr); err != nil {
		t.Fatalf("with the right CA: %v", err)
	}
}

// statusCall makes one Status call with the connection options a Client
// made from opts would use.
func statusCall(t *testing.T, opts Options, addr string) error {
	t.Helper()
	dial, err := opts.dialOptions()
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(addr, dial...)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	_, err = pb.NewRaftMQClient(cc).Status(testCtx(t), &pb.StatusRequest{})
	return err
}

// A token also travels without TLS (RequireTransportSecurity is false).
func TestTokenWithoutTLS(t *testing.T) {
	s := serveAuth(t, nil, "plain-token")
	c, err := New(testCtx(t), []string{s.addr}, Options{Token: "plain-token"})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer c.Close()
	if _, err := c.ListTopics(testCtx(t)); err != nil {
		t.Fatalf("ListTopics: %v", err)
	}
	watchHealth(t, c, s.addr)
	for _, call := range s.seen() {
		if call.authorization != "Bearer plain-token" || call.certCN != "" {
			t.Fatalf("server saw %+v", call)
		}
	}
}

// A refused token ends New at once with codes.Unauthenticated (not "no
// server reachable" after the retry budget); no token sends no header.
func TestRefusedTokenIsNotRetried(t *testing.T) {
	s := serveAuth(t, nil, "the-right-token")
	for _, token := range []string{"a-wrong-token", ""} {
		start := time.Now()
		_, err := New(testCtx(t), []string{s.addr}, Options{Token: token})
		if status.Code(err) != codes.Unauthenticated || errors.Is(err, ErrUnavailable) {
			t.Fatalf("token %q: New: %v, want Unauthenticated", token, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("token %q: refused after %v", token, d)
		}
	}
	calls := s.seen()
	if len(calls) != 2 || calls[0].authorization != "Bearer a-wrong-token" || calls[1].authorization != "" {
		t.Fatalf("server saw %+v", calls)
	}
}

// A token a header cannot carry is refused before anything is dialled.
func TestBadTokenRefused(t *testing.T) {
	for _, token := range []string{"two words", "line\nbreak", "caf\u00e9"} {
		if _, err := New(testCtx(t), []string{deadAddr(t)}, Options{Token: token}); !errors.Is(err, ErrInvalid) {
			t.Errorf("token %q: %v, want ErrInvalid", token, err)
		}
	}
}
