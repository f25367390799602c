package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
	"github.com/raftmq/raftmq/tlsconf"
)

// makeCerts runs `certs ca` and `certs issue` for a node n1 (127.0.0.1)
// and a client "cli-user" into a temp dir.
func makeCerts(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	mustRun(t, "certs", "ca", "--out", dir)
	mustRun(t, "certs", "issue", "n1", "--out", dir, "--ca-dir", dir, "--hosts", "127.0.0.1")
	mustRun(t, "certs", "issue", "cli-user", "--out", dir, "--ca-dir", dir)
	return dir
}

// The files of certs ca and certs issue are what tlsconf loads: the
// certificate, its key, the CA; keys are private; the certificate names
// NAME and --hosts.
func TestCertsMakeLoadableFiles(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	mustRun(t, "certs", "ca", "--out", dir, "--days", "30")
	stdout := mustRun(t, "--json", "certs", "issue", "n1", "--out", out, "--ca-dir", dir,
		"--hosts", "10.0.0.7, node1.example", "--days", "7")
	var got certJSON
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || got.Name != "n1" ||
		got.Cert != filepath.Join(out, "n1.pem") || got.Key != filepath.Join(out, "n1-key.pem") {
		t.Fatalf("issue --json: %q (%v)", stdout, err)
	}
	r, err := tlsconf.Load(tlsconf.Files{Cert: got.Cert, Key: got.Key, CA: filepath.Join(dir, "ca.pem")})
	if err != nil {
		t.Fatalf("tlsconf.Load rejects what certs wrote: %v", err)
	}
	if left := time.Until(r.NotAfter()); left < 6*24*time.Hour || left > 7*24*time.Hour {
		t.Fatalf("--days 7: certificate valid for %v more", left)
	}
	c := readCert(t, got.Cert)
	if c.Subject.CommonName != "n1" || !slices.Equal(c.DNSNames, []string{"node1.example"}) ||
		len(c.IPAddresses) != 1 || !c.IPAddresses[0].Equal(net.ParseIP("10.0.0.7")) {
		t.Fatalf("certificate CN %q DNS %q IP %v", c.Subject.CommonName, c.DNSNames, c.IPAddresses)
	}
	for _, key := range []string{got.Key, filepath.Join(dir, "ca-key.pem")} {
		if st, err := os.Stat(key); err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, mode %v", key, err, st.Mode())
		}
	}
	if _, err := tlsconf.LoadAuthority(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")); err != nil {
		t.Fatalf("certs ca wrote a CA LoadAuthority rejects: %v", err)
	}

	// Default hosts: this machine.
	mustRun(t, "certs", "issue", "local", "--out", out, "--ca-dir", dir)
	c = readCert(t, filepath.Join(out, "local.pem"))
	var ips []string
	for _, ip := range c.IPAddresses {
		ips = append(ips, ip.String())
	}
	if !slices.Equal(c.DNSNames, []string{"localhost"}) || !slices.Equal(ips, []string{"127.0.0.1", "::1"}) {
		t.Fatalf("default hosts: DNS %q IP %q", c.DNSNames, ips)
	}
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s is not PEM", path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Existing files are kept unless --force; a missing CA, a missing flag or
// a NAME that is no file name are refused with a clear message.
func TestCertsRefusals(t *testing.T) {
	dir := t.TempDir()
	mustRun(t, "certs", "ca", "--out", dir)
	before, _ := os.ReadFile(filepath.Join(dir, "ca.pem"))
	code, _, stderr := runCLI(t, "certs", "ca", "--out", dir)
	after, _ := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if code != exitFail || !strings.Contains(stderr, "exists") || !strings.Contains(stderr, "--force") || !bytes.Equal(before, after) {
		t.Fatalf("second certs ca: exit %d %q, file changed %v", code, stderr, !bytes.Equal(before, after))
	}
	mustRun(t, "certs", "ca", "--out", dir, "--force")
	if after, _ = os.ReadFile(filepath.Join(dir, "ca.pem")); bytes.Equal(before, after) {
		t.Fatal("certs ca --force kept the old CA")
	}
	mustRun(t, "certs", "issue", "n1", "--out", dir, "--ca-dir", dir)
	if code, _, stderr := runCLI(t, "certs", "issue", "n1", "--out", dir, "--ca-dir", dir); code != exitFail || !strings.Contains(stderr, "n1.pem exists") {
		t.Fatalf("issue over existing files: exit %d %q", code, stderr)
	}

	missing := filepath.Join(t.TempDir(), "no-ca")
	code, _, stderr = runCLI(t, "certs", "issue", "n2", "--out", t.TempDir(), "--ca-dir", missing)
	if code != exitFail || !strings.Contains(stderr, "--ca-dir "+missing) || !strings.Contains(stderr, "ca.pem") ||
		!strings.Contains(stderr, "certs ca") || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("issue without a CA: exit %d %q", code, stderr)
	}

	for _, args := range [][]string{
		{"certs"},
		{"certs", "ca"},
		{"certs", "ca", "--out", dir, "--days", "0"},
		{"certs", "ca", "--out", dir, "stray"},
		{"certs", "issue", "--out", dir, "--ca-dir", dir},
		{"certs", "issue", "n3", "--ca-dir", dir},
		{"certs", "issue", "n3", "--out", dir},
		{"certs", "issue", "../n3", "--out", dir, "--ca-dir", dir},
		{"certs", "issue", "ca", "--out", dir, "--ca-dir", dir, "--force"}, // would replace the CA
		{"auth"},
		{"auth", "hash"},
		{"auth", "check"},
		{"auth", "token", "extra"},
	} {
		if code, _, stderr := runCLI(t, args...); code != exitUsage || stderr == "" {
			t.Errorf("%q: exit %d %q, want %d", args, code, stderr, exitUsage)
		}
	}
	if _, err := tlsconf.LoadAuthority(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")); err != nil {
		t.Fatalf("the CA was damaged: %v", err)
	}
}

// auth token prints a fresh 256-bit token and its SHA-256; auth hash
// agrees, from the argument or stdin.
func TestAuthTokenAndHash(t *testing.T) {
	var tok tokenJSON
	out := mustRun(t, "auth", "token", "--json")
	if err := json.Unmarshal([]byte(out), &tok); err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	if raw, err := base64.RawURLEncoding.DecodeString(tok.Token); err != nil || len(raw) != 32 {
		t.Fatalf("token %q: %d bytes, %v", tok.Token, len(raw), err)
	}
	sum := sha256.Sum256([]byte(tok.Token))
	if tok.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("token_sha256 %s is not the SHA-256 of %q", tok.SHA256, tok.Token)
	}
	if again := mustRun(t, "auth", "token", "--json"); strings.Contains(again, tok.Token) {
		t.Fatal("two tokens are the same")
	}

	plain := mustRun(t, "auth", "token")
	lines := strings.Split(strings.TrimSpace(plain), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "token\t") || !strings.HasPrefix(lines[1], "token_sha256\t") {
		t.Fatalf("auth token: %q", plain)
	}
	token, hash := strings.TrimPrefix(lines[0], "token\t"), strings.TrimPrefix(lines[1], "token_sha256\t")
	if out := mustRun(t, "auth", "hash", "--", token); out != "token_sha256\t"+hash+"\n" {
		t.Fatalf("auth hash: %q, want %s", out, hash)
	}
	for _, in := range []string{token + "\n", token, token + "\r\n"} {
		code, out, stderr := runWithStdin(t, in, "--json", "auth", "hash", "-")
		if code != exitOK || out != `{"token_sha256":"`+hash+`"}`+"\n" {
			t.Fatalf("auth hash - with stdin %q: exit %d %q %q", in, code, out, stderr)
		}
	}
	// A token that starts with "-" (one in 64 of auth token's) goes after
	// "--" (TestTLSAndTokenFlags passes one to --token as is).
	want := sha256.Sum256([]byte("-x1y2"))
	if out := mustRun(t, "auth", "hash", "--", "-x1y2"); out != "token_sha256\t"+hex.EncodeToString(want[:])+"\n" {
		t.Fatalf("auth hash -- -x1y2: %q", out)
	}
	if code, _, _ := runWithStdin(t, "", "auth", "hash", "-"); code != exitUsage {
		t.Fatalf("auth hash - with empty stdin: exit %d", code)
	}
}

// runWithStdin is runCLI with in as standard input.
func runWithStdin(t *testing.T, in string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code = runWithInput(ctx, args, strings.NewReader(in), &out, &errb)
	return code, out.String(), errb.String()
}

// auth check accepts a good file (with a hash from auth token) and reports
// a bad one with exit status 1.
func TestAuthCheck(t *testing.T) {
	dir := t.TempDir()
	var tok tokenJSON
	if err := json.Unmarshal([]byte(mustRun(t, "auth", "token", "--json")), &tok); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "auth.toml")
	writeFile(t, good, 0o600, `node_token = "0123456789abcdef0123"

[[users]]
name = "orders-service"
token_sha256 = "`+tok.SHA256+`"
produce = ["orders", "orders-*"]

[[users]]
name = "cli-user"
cert_cn = "cli-user"
admin = true
`)
	code, out, stderr := runCLI(t, "auth", "check", good)
	if code != exitOK || out != good+": OK (2 users, node_token set)\n" || stderr != "" {
		t.Fatalf("good file: exit %d %q %q", code, out, stderr)
	}
	if err := os.Chmod(good, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, "auth", "check", good); code != exitOK || !strings.Contains(stderr, "chmod 600") {
		t.Fatalf("world-readable file: exit %d, stderr %q", code, stderr)
	}

	for name, body := range map[string]string{
		"syntax":   "[[users]\nname = 1",
		"unknown":  "[[users]]\nname = \"a\"\ntoken_sha256 = \"" + tok.SHA256 + "\"\nadmn = true\n",
		"short":    "[[users]]\nname = \"a\"\ntoken_sha256 = \"abc\"\n",
		"no-creds": "[[users]]\nname = \"a\"\n",
	} {
		bad := filepath.Join(dir, name+".toml")
		writeFile(t, bad, 0o600, body)
		code, out, stderr := runCLI(t, "auth", "check", bad)
		if code != exitFail || out != "" || !strings.Contains(stderr, bad) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%s: exit %d stdout %q stderr %q", name, code, out, stderr)
		}
		code, out, _ = runCLI(t, "--json", "auth", "check", bad)
		var res checkJSON
		if err := json.Unmarshal([]byte(out), &res); code != exitFail || err != nil || res.OK || res.Error == "" {
			t.Errorf("%s --json: exit %d %q (%v)", name, code, out, err)
		}
	}
	if code, _, stderr := runCLI(t, "auth", "check", filepath.Join(dir, "missing.toml")); code != exitFail || !strings.Contains(stderr, "no such file") {
		t.Fatalf("missing file: exit %d %q", code, stderr)
	}
}

func writeFile(t *testing.T, path string, mode os.FileMode, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
}

// tlsAPI is a TLS server of the raftmq API's Status and ListTopics that
// requires a client certificate of the CA and a token.
type tlsAPI struct {
	pb.UnimplementedRaftMQServer
	addr, token string

	mu     sync.Mutex
	tokens []string
}

func (s *tlsAPI) Status(context.Context, *pb.StatusRequest) (*pb.StatusResponse, error) {
	return &pb.StatusResponse{LeaderApiAddr: s.addr}, nil
}

func (s *tlsAPI) ListTopics(context.Context, *pb.ListTopicsRequest) (*pb.ListTopicsResponse, error) {
	return &pb.ListTopicsResponse{Topics: []*pb.TopicInfo{{Name: "secure", Queues: 2}}}, nil
}

func (s *tlsAPI) check(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	got := strings.Join(md.Get("authorization"), ",")
	s.mu.Lock()
	s.tokens = append(s.tokens, got)
	s.mu.Unlock()
	if got != "Bearer "+s.token {
		return nil, status.Error(codes.Unauthenticated, "unknown token")
	}
	return h(ctx, req)
}

func startTLSAPI(t *testing.T, certDir, token string) *tlsAPI {
	t.Helper()
	r, err := tlsconf.Load(tlsconf.Files{Cert: filepath.Join(certDir, "n1.pem"), Key: filepath.Join(certDir, "n1-key.pem"),
		CA: filepath.Join(certDir, "ca.pem")})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &tlsAPI{addr: lis.Addr().String(), token: token}
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(r.ServerConfig(tls.RequireAndVerifyClientCert))),
		grpc.UnaryInterceptor(s.check))
	pb.RegisterRaftMQServer(g, s)
	done := make(chan error, 1)
	go func() { done <- g.Serve(lis) }()
	t.Cleanup(func() { g.Stop(); <-done })
	return s
}

// The TLS and token flags (or their environment variables) reach the
// server, a token that starts with "-" too; a wrong CA or token fails the operation (exit 1), a missing or
// malformed TLS file is bad usage (exit 2).
func TestTLSAndTokenFlags(t *testing.T) {
	dir := makeCerts(t)
	s := startTLSAPI(t, dir, "-dash-token")
	ca, cert, key := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "cli-user.pem"), filepath.Join(dir, "cli-user-key.pem")
	secure := []string{"--server", s.addr, "--tls-ca", ca, "--tls-cert", cert, "--tls-key", key}

	out := mustRun(t, append(secure, "--token", "-dash-token", "topic", "list")...)
	if !strings.Contains(out, "secure\t2") {
		t.Fatalf("topic list over TLS: %q", out)
	}

	t.Run("env", func(t *testing.T) {
		t.Setenv("RAFTMQ_SERVER", s.addr)
		t.Setenv("RAFTMQ_TLS_CA", ca)
		t.Setenv("RAFTMQ_TLS_CERT", cert)
		t.Setenv("RAFTMQ_TLS_KEY", key)
		t.Setenv("RAFTMQ_TOKEN", "-dash-token")
		if out := mustRun(t, "topic", "list"); !strings.Contains(out, "secure\t2") {
			t.Fatalf("topic list with the environment: %q", out)
		}
		if help := mustRun(t, "--help"); strings.Contains(help, "-dash-token") {
			t.Fatal("help shows RAFTMQ_TOKEN's value")
		}
		// The flag wins over the environment.
		code, _, stderr := runCLI(t, "--token", "not-the-token", "topic", "list")
		if code != exitFail || !strings.Contains(stderr, "unknown token") {
			t.Fatalf("--token over RAFTMQ_TOKEN: exit %d %q", code, stderr)
		}
	})

	otherCA := filepath.Join(t.TempDir(), "other")
	mustRun(t, "certs", "ca", "--out", otherCA)
	notPEM := filepath.Join(t.TempDir(), "ca.txt")
	writeFile(t, notPEM, 0o644, "not a certificate\n")
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"wrong token", append(secure, "--token", "wrong"), exitFail, "unknown token"},
		{"no token", secure, exitFail, "unknown token"},
		{"wrong CA", []string{"--server", s.addr, "--tls-ca", filepath.Join(otherCA, "ca.pem"), "--tls-cert", cert, "--tls-key", key,
			"--token", "-dash-token"}, exitFail, "certificate signed by unknown authority"},
		{"plaintext to TLS", []string{"--server", s.addr, "--token", "-dash-token"}, exitFail, "does it serve TLS? then give --tls-ca"},
		{"missing CA file", []string{"--server", s.addr, "--tls-ca", filepath.Join(dir, "nope.pem")}, exitUsage, "--tls-ca"},
		{"CA not PEM", []string{"--server", s.addr, "--tls-ca", notPEM}, exitUsage, "no PEM certificate"},
		{"cert without key", []string{"--server", s.addr, "--tls-ca", ca, "--tls-cert", cert}, exitUsage, "--tls-cert and --tls-key"},
		{"key is not the cert's", []string{"--server", s.addr, "--tls-ca", ca, "--tls-cert", cert, "--tls-key", filepath.Join(dir, "n1-key.pem")},
			exitUsage, "--tls-cert"},
	} {
		code, _, stderr := runCLI(t, append(c.args, "topic", "list")...)
		if code != c.code || !strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") > 2 {
			t.Errorf("%s: exit %d stderr %q, want exit %d and %q", c.name, code, stderr, c.code, c.want)
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.tokens) == 0 || s.tokens[0] != "Bearer -dash-token" {
		t.Fatalf("server saw tokens %q", s.tokens)
	}
}

// The new commands have help, and the global help names the flags.
func TestSecurityHelp(t *testing.T) {
	for _, args := range [][]string{
		{"certs", "--help"}, {"certs", "ca", "--help"}, {"certs", "issue", "-h"},
		{"auth", "--help"}, {"auth", "token", "--help"}, {"auth", "hash", "--help"}, {"auth", "check", "--help"},
	} {
		code, stdout, stderr := runCLI(t, args...)
		if code != exitOK || !strings.Contains(stdout, "Usage:") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
	help := mustRun(t, "--help")
	for _, want := range []string{"--tls-ca", "--tls-cert", "--tls-key", "--token", "RAFTMQ_TOKEN", "certs", "auth"} {
		if !strings.Contains(help, want) {
			t.Errorf("help lacks %q", want)
		}
	}
	// Offline commands ignore a bad --server and bad TLS files.
	if code, _, stderr := runCLI(t, "--server", "nowhere", "--tls-ca", "/no/such/ca.pem", "auth", "token"); code != exitOK {
		t.Fatalf("auth token with bad global flags: exit %d %q", code, stderr)
	}
}
