package e2e_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/nodeproc"
	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/transport"
)

// TestSecurity runs three nodes with TLS everywhere, mutual TLS between
// them and an auth file (certificates and tokens made at test time), and
// checks what each kind of caller gets: plaintext and foreign-CA clients
// are refused on every port, each token gets exactly its roles, expired
// and revoked tokens are refused (revocation by SIGHUP), a client
// certificate of the cluster CA names its user, the dashboard wants admin,
// a RocketMQ client signs its way in over TLS, a node's certificate rotates
// on SIGHUP, and a node holding a certificate of another CA neither joins
// nor receives an entry.
func TestSecurity(t *testing.T) {
	pki := newPKI(t, filepath.Join(nodeproc.TempDir(t, "e2e-security-pki"), "pki"))
	c := startCluster(t, 3, pki.secure(t), func(o *nodeproc.ClusterOptions) { o.Remoting = true })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin := newClient(t, ctx, c, pki.options(t, "ops"))
	if err := admin.CreateTopic(ctx, "orders", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Send(ctx, client.NewMessage("orders", []byte("first"))); err != nil {
		t.Fatal(err)
	}
	addr := c.Nodes[0].Spec().APIAddr

	t.Run("plaintext and foreign CA refused", func(t *testing.T) {
		for name, creds := range map[string]credentials.TransportCredentials{
			"plaintext":  insecure.NewCredentials(),
			"foreign CA": credentials.NewTLS(foreignClientTLS(t)),
		} {
			cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
			if err != nil {
				t.Fatal(err)
			}
			cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
			_, err = pb.NewRaftMQClient(cc).Status(cctx, &pb.StatusRequest{})
			ccancel()
			_ = cc.Close()
			if status.Code(err) != codes.Unavailable {
				t.Errorf("%s gRPC client: %v, want Unavailable", name, err)
			}
		}
		// HTTP: a plaintext request gets no answer of the node's; a
		// client of another CA fails its handshake.
		httpAddr := c.Nodes[0].Spec().HTTPAddr
		if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + httpAddr + "/healthz"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Error("plaintext /healthz answered 200 on a TLS port")
			}
		}
		foreignHTTP := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: foreignClientTLS(t)}}
		if _, err := foreignHTTP.Get("https://" + httpAddr + "/healthz"); err == nil {
			t.Error("a client of a foreign CA reached /healthz")
		}
		// Remoting: a plaintext RocketMQ frame gets no answer.
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		defer rcancel()
		if rc, err := remoting.Dial(rctx, c.Nodes[0].Spec().RemotingAddr); err == nil {
			_, err = rc.Invoke(rctx, &remoting.Command{Code: remoting.CodeGetRouteInfoByTopic, ExtFields: map[string]string{"topic": "orders"}})
			_ = rc.Close()
			if err == nil {
				t.Error("a plaintext remoting request was answered on a TLS port")
			}
		}
	})

	t.Run("roles", func(t *testing.T) {
		producer := newClient(t, ctx, c, pki.options(t, "producer"))
		if _, err := producer.Send(ctx, client.NewMessage("orders", []byte("by producer"))); err != nil {
			t.Fatalf("producer send: %v", err)
		}
		denied := map[string]error{}
		_, denied["send to another topic"] = producer.Send(ctx, client.NewMessage("payments", []byte("x")))
		_, denied["pull"] = producer.Pull(ctx, client.PullRequest{Topic: "orders"})
		denied["commit offset"] = producer.CommitOffset(ctx, "billing", "orders", 0, 1)
		denied["delete topic"] = producer.DeleteTopic(ctx, "orders")
		denied["create topic"] = producer.CreateTopic(ctx, "orders-new", 1)
		denied["join"] = producer.Join(ctx, "n9", "127.0.0.1:1", "127.0.0.1:2")
		denied["remove"] = producer.Remove(ctx, c.Nodes[2].Spec().ID)
		denied["transfer"] = producer.Transfer(ctx, "")
		for what, err := range denied {
			if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "producer") {
				t.Errorf("producer %s: %v, want PermissionDenied naming the user", what, err)
			}
		}
		consumer := newClient(t, ctx, c, pki.options(t, "consumer"))
		if _, err := consumer.Pull(ctx, client.PullRequest{Topic: "orders"}); err != nil {
			t.Errorf("consumer pull: %v", err)
		}
		if err := consumer.CommitOffset(ctx, "billing", "orders", 0, 1); err != nil {
			t.Errorf("consumer commit: %v", err)
		}
		if _, err := consumer.Send(ctx, client.NewMessage("orders", []byte("x"))); status.Code(err) != codes.PermissionDenied {
			t.Errorf("consumer send: %v", err)
		}
		// The membership is what it was, and the topic is still there.
		st, err := admin.Status(ctx)
		if err != nil || len(st.Members) != 3 {
			t.Fatalf("status after refused membership changes: %v %+v", err, st)
		}
		if _, err := admin.DescribeTopic(ctx, "orders"); err != nil {
			t.Fatalf("orders after a refused delete: %v", err)
		}
		// The CLI says so too, with exit status 1.
		r := runCLI(t, ctx, c.Bin, c.APIAddrs(), "--tls-ca", pki.caFile, "--token", pki.tokens["producer"], "topic", "delete", "orders")
		if r.code != 1 || !strings.Contains(r.stderr, "PermissionDenied") && !strings.Contains(strings.ToLower(r.stderr), "permission") {
			t.Errorf("CLI delete as producer: exit %d, stderr %q", r.code, r.stderr)
		}
	})

	t.Run("unknown expired revoked", func(t *testing.T) {
		for _, tok := range []string{"not-a-token", pki.tokens["expired"]} {
			cc := dialTLS(t, addr, pki.clientTLS(t, ""))
			_, err := pb.NewRaftMQClient(cc).Send(bearerCtx(ctx, tok), &pb.SendRequest{Messages: []*pb.Message{{Topic: "orders", Body: []byte("x")}}})
			if status.Code(err) != codes.Unauthenticated {
				t.Errorf("token %.8s…: %v, want Unauthenticated", tok, err)
			}
			if tok == pki.tokens["expired"] && !strings.Contains(err.Error(), "expired") {
				t.Errorf("the refusal of an expired token does not say so: %v", err)
			}
		}
		rev := newClient(t, ctx, c, pki.options(t, "revocable"))
		if _, err := rev.Send(ctx, client.NewMessage("orders", []byte("before revocation"))); err != nil {
			t.Fatalf("before revocation: %v", err)
		}
		pki.writeAuth(t, true)
		for _, p := range c.Nodes {
			if err := p.Hangup(); err != nil {
				t.Fatal(err)
			}
		}
		// Every node reloads on SIGHUP: each refuses the token directly.
		for _, p := range c.Nodes {
			cc := dialTLS(t, p.Spec().APIAddr, pki.clientTLS(t, ""))
			err := pollUntil(ctx, func() error {
				_, err := pb.NewRaftMQClient(cc).Status(bearerCtx(ctx, pki.tokens["revocable"]), &pb.StatusRequest{})
				if status.Code(err) == codes.Unauthenticated && strings.Contains(err.Error(), "revoked") {
					return nil
				}
				return fmt.Errorf("node %s answers a revoked token with %v", p.Spec().ID, err)
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if _, err := rev.Send(ctx, client.NewMessage("orders", []byte("after revocation"))); status.Code(err) != codes.Unauthenticated {
			t.Errorf("client with a revoked token: %v", err)
		}
	})

	t.Run("client certificate", func(t *testing.T) {
		byCert := newClient(t, ctx, c, client.Options{TLS: pki.clientTLS(t, "billing-app")})
		r, err := byCert.Pull(ctx, client.PullRequest{Topic: "orders", QueueID: 0})
		if err != nil {
			t.Fatalf("pull by certificate: %v", err)
		}
		r1, err := byCert.Pull(ctx, client.PullRequest{Topic: "orders", QueueID: 1})
		if err != nil || len(r.Messages)+len(r1.Messages) == 0 {
			t.Fatalf("pull by certificate read nothing: %v", err)
		}
		if _, err := byCert.Send(ctx, client.NewMessage("orders", []byte("x"))); status.Code(err) != codes.PermissionDenied {
			t.Errorf("send by a consume-only certificate: %v", err)
		}
	})

	t.Run("dashboard and pprof want admin", func(t *testing.T) {
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.pool(t)}}}
		base := "https://" + c.Nodes[0].Spec().HTTPAddr
		for _, path := range []string{"/", "/api/status", "/debug/pprof/"} {
			for who, want := range map[string]int{"": http.StatusUnauthorized, "producer": http.StatusForbidden, "ops": http.StatusOK} {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
				if who != "" {
					req.SetBasicAuth(who, pki.tokens[who])
				}
				resp, err := hc.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				_ = resp.Body.Close()
				if resp.StatusCode != want {
					t.Errorf("GET %s as %q: %d, want %d", path, who, resp.StatusCode, want)
				}
			}
		}
		for _, path := range []string{"/healthz", "/status", "/metrics"} {
			resp, err := hc.Get(base + path)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("GET %s without a token: %d, want 200 (probes and scrapers)", path, resp.StatusCode)
			}
		}
	})

	t.Run("rocketmq client with ACL over TLS", func(t *testing.T) {
		ns := c.Nodes[1].Spec().NamesrvAddr
		good := secureRocketMQProducer(t, ns, "sec-good", primitive.Credentials{AccessKey: "AK-orders", SecretKey: "SK-orders-secret"})
		if err := rmqSendOne(ctx, good, "orders", "over TLS with ACL"); err != nil {
			t.Fatalf("an authorized RocketMQ producer: %v", err)
		}
		if err := rmqSendOne(ctx, good, "payments", "not granted"); err == nil || !strings.Contains(err.Error(), "16") {
			t.Errorf("a RocketMQ send to a topic without a grant: %v, want NO_PERMISSION (16)", err)
		}
		bad := secureRocketMQProducer(t, ns, "sec-bad", primitive.Credentials{AccessKey: "AK-orders", SecretKey: "wrong"})
		if err := rmqSendOne(ctx, bad, "orders", "wrong secret"); err == nil {
			t.Error("a RocketMQ producer with a wrong secret key sent")
		}
		// The refusals are counted.
		var denied float64
		for _, p := range c.Nodes {
			v, err := scrapeCounter(ctx, p, `raftmq_refused_requests_total{reason="remoting_denied"}`)
			if err != nil {
				t.Fatal(err)
			}
			denied += v
		}
		if denied < 2 {
			t.Errorf("remoting refusals counted: %v, want at least 2", denied)
		}
	})

	t.Run("certificate rotation on SIGHUP", func(t *testing.T) {
		n1 := c.Nodes[0]
		served := func() (time.Time, error) {
			cfg := pki.clientTLS(t, "")
			var notAfter time.Time
			cfg.VerifyConnection = func(cs tls.ConnectionState) error {
				notAfter = cs.PeerCertificates[0].NotAfter
				return nil
			}
			conn, err := tls.Dial("tcp", n1.Spec().APIAddr, cfg)
			if err != nil {
				return notAfter, err
			}
			_ = conn.Close()
			return notAfter, nil
		}
		before, err := served()
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := pki.ca.Issue("n1", []string{"127.0.0.1", "localhost"}, time.Now().Add(-time.Minute), before.Add(24*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := leaf.WriteFiles(pki.dir, "n1"); err != nil {
			t.Fatal(err)
		}
		if err := n1.Hangup(); err != nil {
			t.Fatal(err)
		}
		if err := pollUntil(ctx, func() error {
			got, err := served()
			if err != nil || !got.After(before) {
				return fmt.Errorf("n1 serves a certificate expiring %v (before the rotation %v): %v", got, before, err)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		// The cluster serves on: n1's peers accept its new certificate.
		if _, err := admin.Send(ctx, client.NewMessage("orders", []byte("after rotation"))); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("foreign node", func(t *testing.T) {
		foreignNodeRefused(t, ctx, c, pki, admin)
	})
}

// foreignNodeRefused starts a fourth node with a certificate of another
// CA (and the right auth file): its own --join fails; added by an admin, it
// is sent nothing (the leader's Raft handshakes with it fail) and applies
// nothing; removed again, the cluster serves on.
func foreignNodeRefused(t *testing.T, ctx context.Context, c *nodeproc.Cluster, pki *testPKI, admin *client.Client) {
	foreign := newPKI(t, filepath.Join(filepath.Dir(pki.dir), "foreign"))
	cert, key := foreign.issue(t, "n4")
	ports, err := nodeproc.FreePorts("127.0.0.1", 3)
	if err != nil {
		t.Fatal(err)
	}
	hp := func(i int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[i])) }
	spec := nodeproc.Spec{ID: "n4", Dir: filepath.Join(filepath.Dir(c.Nodes[0].Spec().Dir), "n4"),
		RaftAddr: hp(0), APIAddr: hp(1), HTTPAddr: hp(2), Join: c.Nodes[0].Spec().APIAddr,
		// The small-store config (--config FILE) of the others, then foreign TLS.
		Args:    append(append([]string{}, c.Nodes[0].Spec().Args[:2]...), "--tls-cert", cert, "--tls-key", key, "--tls-ca", foreign.caFile, "--auth-file", pki.authFile),
		HTTPTLS: &tls.Config{RootCAs: foreign.pool(t)}}
	p, err := nodeproc.Start(c.Bin, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer scancel()
		_, _ = p.Stop(sctx)
	})
	// Its join is refused at the TLS handshake (it does not trust the
	// cluster's certificates, and the cluster does not trust its own).
	if err := pollUntil(ctx, func() error {
		log, err := os.ReadFile(p.LogPath())
		if err != nil {
			return err
		}
		if strings.Contains(string(log), "join failed") && strings.Contains(string(log), "certificate") {
			return nil
		}
		return errors.New("no refused join in n4's log yet")
	}); err != nil {
		t.Fatal(err)
	}
	lead, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before := refusedRaftTLS(t, ctx, c.Nodes[lead])
	// An admin adds it anyway: the leader cannot open a connection to it.
	jctx, jcancel := context.WithTimeout(ctx, 5*time.Second)
	err = admin.Join(jctx, "n4", spec.RaftAddr, spec.APIAddr)
	jcancel()
	if err == nil {
		t.Fatal("a node with a foreign certificate was promoted to voter")
	}
	if err := pollUntil(ctx, func() error {
		if got := refusedRaftTLS(t, ctx, c.Nodes[lead]); got < before+3 {
			return fmt.Errorf("leader counted %v failed Raft handshakes, %v before the join", got, before)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Send(ctx, client.NewMessage("orders", []byte("while n4 is listed"))); err != nil {
		t.Fatal(err)
	}
	st, err := p.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.AppliedIndex != 0 || st.CommitIndex != 0 || st.MaxOffset > 0 {
		t.Fatalf("the foreign node received entries: applied %d, commit %d, max offset %d", st.AppliedIndex, st.CommitIndex, st.MaxOffset)
	}
	if err := admin.Remove(ctx, "n4"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Send(ctx, client.NewMessage("orders", []byte("after n4 removed"))); err != nil {
		t.Fatal(err)
	}
}

// refusedRaftTLS reads raftmq_refused_requests_total{reason="raft_tls"}.
func refusedRaftTLS(t *testing.T, ctx context.Context, p *nodeproc.Proc) float64 {
	t.Helper()
	v, err := scrapeCounter(ctx, p, `raftmq_refused_requests_total{reason="raft_tls"}`)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func foreignClientTLS(t *testing.T) *tls.Config {
	t.Helper()
	f := newPKI(t, filepath.Join(t.TempDir(), "other"))
	return f.clientTLS(t, "")
}

func dialTLS(t *testing.T, addr string, cfg *tls.Config) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

func bearerCtx(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, transport.MetadataAuthorization, "Bearer "+token)
}

// secureRocketMQProducer is an Apache RocketMQ Go producer speaking TLS to
// the name server ns, signing with cred. WithTls(true) changes the Go
// client's process-wide default: the plaintext RocketMQ clients of other
// tests say WithTls(false) for that reason.
func secureRocketMQProducer(t *testing.T, ns, name string, cred primitive.Credentials) rocketmq.Producer {
	t.Helper()
	rlog.SetLogLevel("fatal")
	p, err := rocketmq.NewProducer(producer.WithNsResolver(primitive.NewPassthroughResolver([]string{ns})),
		producer.WithGroupName("pg-"+name), producer.WithInstanceName(name), producer.WithRetry(0),
		producer.WithSendMsgTimeout(5*time.Second), producer.WithTls(true), producer.WithCredentials(cred))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown() })
	return p
}

func rmqSendOne(ctx context.Context, p rocketmq.Producer, topic, body string) error {
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	res, err := p.SendSync(sctx, primitive.NewMessage(topic, []byte(body)))
	if err == nil && res.Status != primitive.SendOK {
		err = fmt.Errorf("send status %v", res.Status)
	}
	return err
}
