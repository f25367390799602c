package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// pki is a CA and certificates issued by it, written to a temp dir.
type pki struct {
	dir string
	ca  *Authority
}

func newPKI(t *testing.T, name string) pki {
	t.Helper()
	ca, err := NewAuthority(name+" CA", time.Now().Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ca.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	return pki{dir: dir, ca: ca}
}

func (p pki) issue(t *testing.T, cn string, notAfter time.Time) Files {
	t.Helper()
	leaf, err := p.ca.Issue(cn, []string{"127.0.0.1", "localhost"}, time.Now().Add(-time.Minute), notAfter)
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := leaf.WriteFiles(p.dir, cn)
	if err != nil {
		t.Fatal(err)
	}
	return Files{Cert: cert, Key: key, CA: filepath.Join(p.dir, "ca.pem")}
}

// handshake runs one TLS exchange over a pipe and returns the server's
// view of the client certificate name and the errors of each side.
func handshake(server, client *tls.Config) (clientName, serverCN string, serverErr, clientErr error) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s := tls.Server(a, server)
		if serverErr = s.Handshake(); serverErr == nil {
			st := s.ConnectionState()
			clientName = PeerName(&st)
		} else {
			_, _ = io.Copy(io.Discard, a) // let the client see the alert
		}
	}()
	c := tls.Client(b, client)
	if clientErr = c.Handshake(); clientErr == nil {
		serverCN = c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	_ = b.Close()
	<-done
	return
}

func TestMutualTLSBetweenPeers(t *testing.T) {
	cluster := newPKI(t, "cluster")
	n1, err := Load(cluster.issue(t, "n1", time.Now().Add(time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	n2, err := Load(cluster.issue(t, "n2", time.Now().Add(time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	name, server, serr, cerr := handshake(n1.ServerConfig(tls.RequireAndVerifyClientCert), n2.PeerConfig())
	if serr != nil || cerr != nil || name != "n2" || server != "n1" {
		t.Fatalf("cluster peers: client name %q server %q, errors %v / %v", name, server, serr, cerr)
	}

	foreign := newPKI(t, "foreign")
	f, err := Load(foreign.issue(t, "n9", time.Now().Add(time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	// A foreign node dialing a member: the member refuses its certificate.
	if _, _, serr, _ := handshake(n1.ServerConfig(tls.RequireAndVerifyClientCert), f.PeerConfig()); serr == nil {
		t.Fatal("a member accepted a client certificate of a foreign CA")
	}
	// A member dialing a foreign node: the member refuses the server.
	if _, _, _, cerr := handshake(f.ServerConfig(tls.RequireAndVerifyClientCert), n1.PeerConfig()); cerr == nil {
		t.Fatal("a member accepted a server certificate of a foreign CA")
	}
	// No client certificate at all.
	plain := &tls.Config{InsecureSkipVerify: true}
	if _, _, serr, _ := handshake(n1.ServerConfig(tls.RequireAndVerifyClientCert), plain); serr == nil {
		t.Fatal("a member accepted a peer without a client certificate")
	}
}

func TestClientConfigChecksCAAndHost(t *testing.T) {
	cluster := newPKI(t, "cluster")
	files := cluster.issue(t, "n1", time.Now().Add(time.Hour))
	n1, err := Load(files)
	if err != nil {
		t.Fatal(err)
	}
	good, err := ClientConfig(files.CA, "", "")
	if err != nil {
		t.Fatal(err)
	}
	good.ServerName = "127.0.0.1"
	name, _, serr, cerr := handshake(n1.ServerConfig(tls.VerifyClientCertIfGiven), good)
	if serr != nil || cerr != nil || name != "" {
		t.Fatalf("client without certificate: name %q errors %v / %v", name, serr, cerr)
	}
	wrongHost := good.Clone()
	wrongHost.ServerName = "db.example"
	if _, _, _, cerr := handshake(n1.ServerConfig(tls.VerifyClientCertIfGiven), wrongHost); cerr == nil {
		t.Fatal("a client accepted a certificate for another host")
	}
	foreign := newPKI(t, "foreign")
	wrongCA, err := ClientConfig(filepath.Join(foreign.dir, "ca.pem"), "", "")
	if err != nil {
		t.Fatal(err)
	}
	wrongCA.ServerName = "127.0.0.1"
	if _, _, _, cerr := handshake(n1.ServerConfig(tls.VerifyClientCertIfGiven), wrongCA); cerr == nil {
		t.Fatal("a client accepted a server of another CA")
	}
	// A client certificate of the cluster CA names the client.
	app := cluster.issue(t, "orders-service", time.Now().Add(time.Hour))
	withCert, err := ClientConfig(files.CA, app.Cert, app.Key)
	if err != nil {
		t.Fatal(err)
	}
	withCert.ServerName = "localhost"
	if name, _, serr, cerr := handshake(n1.ServerConfig(tls.VerifyClientCertIfGiven), withCert); serr != nil || cerr != nil || name != "orders-service" {
		t.Fatalf("client certificate: name %q errors %v / %v", name, serr, cerr)
	}
}

func TestReloadRotatesAndKeepsOldOnError(t *testing.T) {
	cluster := newPKI(t, "cluster")
	files := cluster.issue(t, "n1", time.Now().Add(time.Hour))
	r, err := Load(files)
	if err != nil {
		t.Fatal(err)
	}
	first := r.NotAfter()
	peer, err := Load(cluster.issue(t, "n2", time.Now().Add(time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	server := r.ServerConfig(tls.RequireAndVerifyClientCert) // made once, before the rotation

	// Rotate: a new certificate for n1 with a later expiry, same paths.
	leaf, err := cluster.ca.Issue("n1", []string{"127.0.0.1"}, time.Now().Add(-time.Minute), time.Now().Add(48*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := leaf.WriteFiles(cluster.dir, "n1"); err != nil {
		t.Fatal(err)
	}
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	if !r.NotAfter().After(first) {
		t.Fatalf("after reload the certificate expires %v, not after %v", r.NotAfter(), first)
	}
	var served *x509.Certificate
	client := peer.PeerConfig()
	client.VerifyConnection = func(cs tls.ConnectionState) error { served = cs.PeerCertificates[0]; return nil }
	if _, _, serr, cerr := handshake(server, client); serr != nil || cerr != nil {
		t.Fatal(serr, cerr)
	}
	if !served.NotAfter.Equal(r.NotAfter()) {
		t.Fatalf("the server config made before the reload served the old certificate (expires %v)", served.NotAfter)
	}

	// A broken file: Reload fails, the rotated material stays.
	if err := os.WriteFile(files.Cert, []byte("not pem"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.Reload(); err == nil {
		t.Fatal("reload of a broken certificate succeeded")
	}
	if _, _, serr, cerr := handshake(server, peer.PeerConfig()); serr != nil || cerr != nil {
		t.Fatalf("after a failed reload: %v / %v", serr, cerr)
	}
}

func TestLoadRefusesMismatches(t *testing.T) {
	cluster := newPKI(t, "cluster")
	foreign := newPKI(t, "foreign")
	good := cluster.issue(t, "n1", time.Now().Add(time.Hour))
	other := foreign.issue(t, "n1", time.Now().Add(time.Hour))
	for name, f := range map[string]Files{
		"partial":        {Cert: good.Cert, Key: good.Key},
		"foreign CA":     {Cert: good.Cert, Key: good.Key, CA: other.CA},
		"key of another": {Cert: good.Cert, Key: other.Key, CA: good.CA},
		"missing":        {Cert: good.Cert + ".gone", Key: good.Key, CA: good.CA},
		"CA not PEM":     {Cert: good.Cert, Key: good.Key, CA: good.Key + ".none"},
	} {
		if _, err := Load(f); err == nil {
			t.Errorf("%s: Load succeeded", name)
		}
	}
	if err := (Files{CA: good.CA}).Check(); err == nil {
		t.Error("a CA alone passed Check")
	}
	if _, err := LoadPool(good.Key); !errors.Is(err, ErrNoCertificate) {
		t.Errorf("a key file as CA: %v", err)
	}
	a, err := LoadAuthority(filepath.Join(cluster.dir, "ca.pem"), filepath.Join(cluster.dir, "ca-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadAuthority(good.Cert, good.Key); err == nil {
		t.Error("a leaf loaded as an authority")
	}
	if _, err := a.Issue("", nil, time.Now(), time.Now().Add(time.Hour)); err == nil {
		t.Error("a certificate without a name was issued")
	}
}
