package e2e_test

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/auth"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/nodeproc"
	"github.com/raftmq/raftmq/tlsconf"
)

// testPKI is a cluster CA with node and client certificates and an auth
// file, made at test time in dir.
type testPKI struct {
	dir      string
	ca       *tlsconf.Authority
	caFile   string
	authFile string
	tokens   map[string]string // user -> token
}

// authUsers is the auth file's users (tokens are filled in by newPKI).
// "revocable" is revoked by rewriting the file (see revoke).
const authUsers = `
[[users]]
name = "ops"
token_sha256 = "{ops}"
admin = true

[[users]]
name = "producer"
token_sha256 = "{producer}"
produce = ["orders", "orders-*"]

[[users]]
name = "consumer"
token_sha256 = "{consumer}"
consume = ["orders*"]
groups = ["billing"]

[[users]]
name = "expired"
token_sha256 = "{expired}"
expires = 2020-01-01T00:00:00Z
produce = ["*"]

[[users]]
name = "revocable"
token_sha256 = "{revocable}"
revoked = false
produce = ["*"]

[[users]]
name = "steady"
token_sha256 = "{steady}"
produce = ["orders"]
produce_messages_per_second = 100000

[[users]]
name = "billing-app"
cert_cn = "billing-app"
consume = ["orders*"]
groups = ["billing"]

[[users]]
name = "rocketmq-app"
access_key = "AK-orders"
secret_key = "SK-orders-secret"
produce = ["orders*"]
consume = ["orders*"]
groups = ["billing"]
`

func newPKI(t testing.TB, dir string) *testPKI {
	t.Helper()
	ca, err := tlsconf.NewAuthority("raftmq e2e CA", time.Now().Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	caFile, _, err := ca.WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := &testPKI{dir: dir, ca: ca, caFile: caFile, authFile: filepath.Join(dir, "auth.toml"), tokens: map[string]string{}}
	p.writeAuth(t, false)
	return p
}

// writeAuth writes the auth file; revoke marks "revocable" revoked.
func (p *testPKI) writeAuth(t testing.TB, revoke bool) {
	t.Helper()
	body := authUsers
	for _, u := range []string{"ops", "producer", "consumer", "expired", "revocable", "steady", "node"} {
		if p.tokens[u] == "" {
			p.tokens[u] = auth.NewToken()
		}
		body = strings.ReplaceAll(body, "{"+u+"}", auth.HashToken(p.tokens[u]))
	}
	if revoke {
		body = strings.Replace(body, "revoked = false", "revoked = true", 1)
	}
	body = "node_token = \"" + p.tokens["node"] + "\"\n" + body
	if _, err := auth.Parse(body); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.authFile, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// issue writes name.pem and name-key.pem for 127.0.0.1 and localhost.
func (p *testPKI) issue(t testing.TB, name string) (certFile, keyFile string) {
	t.Helper()
	leaf, err := p.ca.Issue(name, []string{"127.0.0.1", "localhost"}, time.Now().Add(-time.Minute), time.Now().Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err = leaf.WriteFiles(p.dir, name)
	if err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// nodeArgs are node id's security flags.
func (p *testPKI) nodeArgs(t testing.TB, id string) []string {
	cert, key := p.issue(t, id)
	return []string{"--tls-cert", cert, "--tls-key", key, "--tls-ca", p.caFile, "--auth-file", p.authFile}
}

// clientTLS trusts the CA (and presents a client certificate if name != "").
func (p *testPKI) clientTLS(t testing.TB, name string) *tls.Config {
	t.Helper()
	var cert, key string
	if name != "" {
		cert, key = p.issue(t, name)
	}
	cfg, err := tlsconf.ClientConfig(p.caFile, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func (p *testPKI) pool(t testing.TB) *x509.CertPool {
	t.Helper()
	pool, err := tlsconf.LoadPool(p.caFile)
	if err != nil {
		t.Fatal(err)
	}
	return pool
}

// secure makes a cluster run with TLS and authentication: per-node
// certificates, https for the harness, the CLI with the CA and the admin
// token.
func (p *testPKI) secure(t testing.TB) func(*nodeproc.ClusterOptions) {
	return func(o *nodeproc.ClusterOptions) {
		o.ArgsFor = func(i int) []string { return p.nodeArgs(t, "n"+string(rune('1'+i))) }
		o.HTTPTLS = &tls.Config{RootCAs: p.pool(t)}
		o.CLIArgs = []string{"--tls-ca", p.caFile, "--token", p.tokens["ops"]}
	}
}

// options are Go client options as user (a token) with the CA.
func (p *testPKI) options(t testing.TB, user string) client.Options {
	return client.Options{TLS: p.clientTLS(t, ""), Token: p.tokens[user]}
}
