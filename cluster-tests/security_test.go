package clustertest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/auth"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/nodeproc"
	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
	"github.com/raftmq/raftmq/tlsconf"
)

// clusterSecurity is what a secure test cluster (clusterOptions.secure)
// runs with, made at test time in dir/pki: outside the node data dirs,
// which are lossyfs mounts whose unsynced files a power loss drops and
// which a membership fault wipes. It holds a CA, one certificate per node
// (CN the node id, valid for the node's IP, 127.0.0.1 and localhost) and an
// auth file (mode 0600) with a random node_token and one admin user, whose
// token the harness presents on everything it asks (gRPC and the
// admin-only HTTP pages).
type clusterSecurity struct {
	dir      string
	caFile   string
	authFile string
	token    string      // the harness user's token (admin)
	tls      *tls.Config // trusts the CA; the server name is the host dialled
	http     *http.Client
	nodeArgs [][]string // node i's --tls-cert, --tls-key, --tls-ca, --auth-file
}

// harnessUser is the auth file's one user: the harness, an admin.
const harnessUser = "cluster-tests"

// authFileBody is the auth file: the node token and the harness user.
const authFileBody = `# written by cluster-tests for one test cluster
node_token = %q

[[users]]
name = %q
token_sha256 = %q
admin = true
`

// newClusterSecurity makes the CA, a certificate for each node (ips[i] is
// node i's address) and the auth file in dir.
func newClusterSecurity(dir string, ips []string) (*clusterSecurity, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	notBefore, notAfter := time.Now().Add(-time.Hour), time.Now().Add(30*24*time.Hour) // longer than any chaos run
	ca, err := tlsconf.NewAuthority("raftmq cluster-tests CA", notAfter)
	if err != nil {
		return nil, err
	}
	caFile, _, err := ca.WriteFiles(dir)
	if err != nil {
		return nil, err
	}
	s := &clusterSecurity{dir: dir, caFile: caFile, authFile: filepath.Join(dir, "auth.toml"), token: auth.NewToken()}
	body := fmt.Sprintf(authFileBody, auth.NewToken(), harnessUser, auth.HashToken(s.token))
	if _, err := auth.Parse(body); err != nil {
		return nil, fmt.Errorf("auth file: %w", err)
	}
	if err := os.WriteFile(s.authFile, []byte(body), 0o600); err != nil {
		return nil, err
	}
	for i, ip := range ips {
		id := "n" + strconv.Itoa(i+1)
		hosts := []string{ip}
		if ip != "127.0.0.1" {
			hosts = append(hosts, "127.0.0.1")
		}
		leaf, err := ca.Issue(id, append(hosts, "localhost"), notBefore, notAfter)
		if err != nil {
			return nil, err
		}
		cert, key, err := leaf.WriteFiles(dir, id)
		if err != nil {
			return nil, err
		}
		s.nodeArgs = append(s.nodeArgs, []string{"--tls-cert", cert, "--tls-key", key, "--tls-ca", caFile, "--auth-file", s.authFile})
	}
	if s.tls, err = tlsconf.ClientConfig(caFile, "", ""); err != nil {
		return nil, err
	}
	s.http = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: s.tls}}
	return s, nil
}

// argsFor is node i's security flags (nodeproc.ClusterOptions.ArgsFor).
func (s *clusterSecurity) argsFor(i int) []string { return s.nodeArgs[i] }

// cliArgs are the CLI's global flags (nodeproc.Cluster.CLIArgs).
func (s *clusterSecurity) cliArgs() []string {
	return []string{"--tls-ca", s.caFile, "--token", s.token}
}

// bearer puts the harness token on every call of a direct connection.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

// RequireTransportSecurity: the harness sends its token over TLS only.
func (bearer) RequireTransportSecurity() bool { return true }

// dialOptions are the transport options of a direct connection: TLS and
// the harness token on a secure cluster, plaintext otherwise.
func (tc *testCluster) dialOptions() []grpc.DialOption {
	if tc.sec == nil {
		return []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	return []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(tc.sec.tls)), grpc.WithPerRPCCredentials(bearer(tc.sec.token))}
}

// clientOptions are the Go client's options: TLS and the harness token on
// a secure cluster.
func (tc *testCluster) clientOptions(readAny bool) client.Options {
	o := client.Options{ReadFromAny: readAny}
	if tc.sec != nil {
		o.TLS, o.Token = tc.sec.tls, tc.sec.token
	}
	return o
}

// adminGet fetches an admin-only HTTP page (pprof, the dashboard) of node
// p: with the harness token over https on a secure cluster.
func (tc *testCluster) adminGet(ctx context.Context, p *nodeproc.Proc, path string) ([]byte, error) {
	if tc.sec == nil {
		return p.Get(ctx, path)
	}
	body, code, err := tc.secureGet(ctx, p, path, true)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("node %s %s: HTTP %d: %s", p.Spec().ID, path, code, bytes.TrimSpace(body))
	}
	return body, err
}

// secureGet is one GET over https, with the harness token if withToken.
func (tc *testCluster) secureGet(ctx context.Context, p *nodeproc.Proc, path string, withToken bool) ([]byte, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+p.Spec().HTTPAddr+path, nil)
	if err != nil {
		return nil, 0, err
	}
	if withToken {
		req.Header.Set("Authorization", "Bearer "+tc.sec.token)
	}
	resp, err := tc.sec.http.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return body, resp.StatusCode, err
}

// proveSecure shows that every running node of a secure cluster really
// runs with TLS and authentication (when is "start" or "end": the end
// covers nodes restarted, power-cycled and re-joined wiped): a plaintext
// gRPC call is refused at the transport; a TLS call without a token is
// refused as Unauthenticated and counted in raftmq_refused_requests_total,
// read back from /metrics over https; /metrics over plain http is not
// served; pprof needs the admin token. Each proof is counted in the tally's
// evidence, each failure as a security failure. It takes well under a
// second per node.
func proveSecure(ctx context.Context, tc *testCluster, tl *tally, when string) {
	for i, p := range tc.c.Nodes {
		if !p.Running() {
			continue
		}
		if err := proveNodeSecure(ctx, tc, p, tl); err != nil {
			tl.problem(&tl.SecurityFailures, "%s of the run: node %s: %v", when, tc.id(i), err)
		}
	}
}

func proveNodeSecure(ctx context.Context, tc *testCluster, p *nodeproc.Proc, tl *tally) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	addr := p.Spec().APIAddr
	req := &pb.QueueOffsetsRequest{Topic: topic, QueueId: 0}

	// 1. Plaintext gRPC: the TLS listener drops it before any RPC runs.
	code, err := callOnce(ctx, addr, grpc.WithTransportCredentials(insecure.NewCredentials()), req)
	if err != nil {
		return err
	}
	if code != codes.Unavailable {
		return fmt.Errorf("a plaintext gRPC call to %s got %v, want Unavailable (refused by TLS)", addr, code)
	}
	tl.Evidence["secure/plaintext-grpc-refused"]++

	// 2. TLS without a token: the guard refuses it (and counts it).
	code, err = callOnce(ctx, addr, grpc.WithTransportCredentials(credentials.NewTLS(tc.sec.tls)), req)
	if err != nil {
		return err
	}
	if code != codes.Unauthenticated {
		return fmt.Errorf("a TLS gRPC call to %s without a token got %v, want Unauthenticated", addr, code)
	}
	tl.Evidence["secure/tokenless-grpc-refused"]++

	// 3. /metrics over https (open without a token) counts that refusal.
	metrics, err := p.Get(ctx, "/metrics")
	if err != nil {
		return fmt.Errorf("scrape /metrics over https: %w", err)
	}
	denied, ok := metricValue(metrics, `raftmq_refused_requests_total{reason="denied"}`)
	if !ok || denied < 1 {
		return fmt.Errorf(`/metrics over https: raftmq_refused_requests_total{reason="denied"} = %v (found %v), want >= 1 after a refused call`, denied, ok)
	}
	tl.Evidence["secure/https-metrics-scraped"]++

	// 4. The HTTP port does not serve plain http.
	plain, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.Spec().HTTPAddr+"/metrics", nil)
	if err != nil {
		return err
	}
	if resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(plain); err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return fmt.Errorf("/metrics answered 200 over plain http")
		}
	}
	tl.Evidence["secure/plain-http-refused"]++

	// 5. pprof needs the admin token.
	if _, code, err := tc.secureGet(ctx, p, "/debug/pprof/cmdline", false); err != nil || code != http.StatusUnauthorized {
		return fmt.Errorf("pprof without a token: HTTP %d, %v; want 401", code, err)
	}
	if _, err := tc.adminGet(ctx, p, "/debug/pprof/cmdline"); err != nil {
		return fmt.Errorf("pprof with the admin token: %w", err)
	}
	tl.Evidence["secure/pprof-admin-only"]++
	return nil
}

// callOnce makes one QueueOffsets call on a fresh connection and returns
// its status code; err is for a connection that could not be set up.
func callOnce(ctx context.Context, addr string, creds grpc.DialOption, req *pb.QueueOffsetsRequest) (codes.Code, error) {
	cc, err := grpc.NewClient(addr, creds)
	if err != nil {
		return codes.Unknown, err
	}
	defer cc.Close()
	_, err = pb.NewRaftMQClient(cc).QueueOffsets(ctx, req)
	return status.Code(err), nil
}

// metricValue finds the sample named (with labels) name in a Prometheus
// text exposition.
func metricValue(exposition []byte, name string) (float64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(exposition))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), name+" ")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0, false
		}
		v, err := strconv.ParseFloat(f[0], 64)
		return v, err == nil
	}
	return 0, false
}
