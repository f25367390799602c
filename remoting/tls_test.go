package remoting

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/raftmq/raftmq/tlsconf"
)

// testTLS is a CA and a server certificate for 127.0.0.1 written to a
// temporary directory, loaded as a node loads them.
type testTLS struct {
	files  tlsconf.Files
	server *tlsconf.Reloader
}

func newTestTLS(t *testing.T, cn string) testTLS {
	t.Helper()
	dir := t.TempDir()
	ca, err := tlsconf.NewAuthority(cn+" CA", time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue(cn, []string{"127.0.0.1", "localhost"}, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	caFile, _, err := ca.WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := leaf.WriteFiles(dir, cn)
	if err != nil {
		t.Fatal(err)
	}
	files := tlsconf.Files{Cert: certFile, Key: keyFile, CA: caFile}
	r, err := tlsconf.Load(files)
	if err != nil {
		t.Fatal(err)
	}
	return testTLS{files: files, server: r}
}

// tlsServer serves h over TLS with cfg on loopback.
func tlsServer(t *testing.T, h Handler, cfg *tls.Config) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(h, Options{})
	served := make(chan error, 1)
	go func() { served <- s.Serve(tls.NewListener(l, cfg)) }()
	t.Cleanup(func() {
		_ = s.Close()
		<-served
	})
	return l.Addr().String()
}

// TestDialTLS: DialTLS reaches a server behind tls.NewListener with a
// client config that verifies the host (tlsconf.ClientConfig) and with a
// node's peer config; a plaintext Dial to it gets no answer, DialTLS to a
// plaintext server and DialTLS trusting another CA fail, and Dial with a
// nil config is plaintext.
func TestDialTLS(t *testing.T) {
	echoFields := HandlerFunc(func(_ context.Context, _ *Conn, req *Command) *Command {
		resp := req.Response(CodeSuccess, "")
		resp.ExtFields = req.ExtFields
		return resp
	})
	mat := newTestTLS(t, "node-1")
	addr := tlsServer(t, echoFields, mat.server.ServerConfig(tls.VerifyClientCertIfGiven))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	clientCfg, err := tlsconf.ClientConfig(mat.files.CA, "", "")
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]*tls.Config{"client config": clientCfg, "peer config": mat.server.PeerConfig()} {
		c, err := DialTLS(ctx, addr, cfg)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		resp, err := c.Invoke(ctx, &Command{Code: 1, ExtFields: map[string]string{"v": name}})
		if err != nil || resp.Code != CodeSuccess || resp.Field("v") != name {
			t.Fatalf("%s: answer %v, %v", name, resp, err)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("%s: close: %v", name, err)
		}
	}

	plain, err := Dial(ctx, addr) // TCP connects; the first frame is no TLS handshake
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	ictx, icancel := context.WithTimeout(ctx, 5*time.Second)
	if resp, err := plain.Invoke(ictx, &Command{Code: 1}); err == nil {
		t.Fatalf("a plaintext client of a TLS server got an answer: %v", resp)
	}
	icancel()

	other := newTestTLS(t, "stranger")
	otherCfg, err := tlsconf.ClientConfig(other.files.CA, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := DialTLS(ctx, addr, otherCfg); err == nil {
		c.Close()
		t.Fatal("DialTLS trusting another CA connected")
	}
	if c, err := DialTLS(ctx, addr, other.server.PeerConfig()); err == nil {
		c.Close()
		t.Fatal("DialTLS with another cluster's peer config connected")
	}

	_, plainAddr := testServer(t, echoFields, Options{})
	if c, err := DialTLS(ctx, plainAddr, clientCfg); err == nil {
		c.Close()
		t.Fatal("DialTLS to a plaintext server connected")
	}
	c, err := DialTLS(ctx, plainAddr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if resp, err := c.Invoke(ctx, &Command{Code: 1}); err != nil || resp.Code != CodeSuccess {
		t.Fatalf("DialTLS with a nil config to a plaintext server: %v, %v", resp, err)
	}
}
