package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"
)

// ErrNoCertificate is wrapped when a file holds no usable certificate.
var ErrNoCertificate = errors.New("tlsconf: no certificate")

// Files names the PEM files of a node: its certificate (chain), its key and
// the CA bundle that issued the cluster's certificates.
type Files struct {
	Cert, Key, CA string
}

// Enabled reports whether any file is set.
func (f Files) Enabled() bool { return f.Cert != "" || f.Key != "" || f.CA != "" }

// Check reports a partial set: TLS needs all three files.
func (f Files) Check() error {
	if !f.Enabled() {
		return nil
	}
	if f.Cert == "" || f.Key == "" || f.CA == "" {
		return fmt.Errorf("tlsconf: --tls-cert, --tls-key and --tls-ca go together (got cert %q, key %q, ca %q)", f.Cert, f.Key, f.CA)
	}
	return nil
}

// material is one consistent load of the files.
type material struct {
	cert     *tls.Certificate
	pool     *x509.CertPool
	notAfter time.Time
}

// Reloader holds the newest material loaded from Files.
type Reloader struct {
	files Files
	cur   atomic.Pointer[material]
}

// Load reads files; it fails if any is missing, malformed, or if the
// certificate does not match its key or is not issued by the CA.
func Load(files Files) (*Reloader, error) {
	if err := files.Check(); err != nil {
		return nil, err
	}
	if !files.Enabled() {
		return nil, fmt.Errorf("%w: no files given", ErrNoCertificate)
	}
	r := &Reloader{files: files}
	if err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// Reload reads the files again. On error the material in use is kept.
func (r *Reloader) Reload() error {
	m, err := loadMaterial(r.files)
	if err != nil {
		return err
	}
	r.cur.Store(m)
	return nil
}

// NotAfter is the expiry of the certificate in use.
func (r *Reloader) NotAfter() time.Time { return r.cur.Load().notAfter }

func loadMaterial(f Files) (*material, error) {
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("tlsconf: load %s and %s: %w", f.Cert, f.Key, err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("tlsconf: parse %s: %w", f.Cert, err)
	}
	cert.Leaf = leaf
	pool, err := LoadPool(f.CA)
	if err != nil {
		return nil, err
	}
	inter := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, fmt.Errorf("tlsconf: %s is not issued by the CA in %s: %w", f.Cert, f.CA, err)
	}
	return &material{cert: &cert, pool: pool, notAfter: leaf.NotAfter}, nil
}

// LoadPool reads a PEM bundle of CA certificates.
func LoadPool(caFile string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("tlsconf: read CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%w: %s holds no PEM certificate", ErrNoCertificate, caFile)
	}
	return pool, nil
}

// ServerConfig serves the node's newest certificate. clientAuth says what
// is asked of clients: tls.RequireAndVerifyClientCert between nodes,
// tls.VerifyClientCertIfGiven on client-facing ports (a certificate, when
// given, must chain to the CA and names the client; see PeerName).
func (r *Reloader) ServerConfig(clientAuth tls.ClientAuthType) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := r.cur.Load()
			return &tls.Config{
				MinVersion:   tls.VersionTLS12,
				Certificates: []tls.Certificate{*m.cert},
				ClientAuth:   clientAuth,
				ClientCAs:    m.pool,
				NextProtos:   []string{"h2", "http/1.1"},
			}, nil
		},
	}
}

// PeerConfig dials another node: it presents this node's certificate and
// accepts a server whose chain leads to the CA (host names unchecked).
func (r *Reloader) PeerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return r.cur.Load().cert, nil
		},
		// The chain is verified below against the newest pool; Go's own
		// verification would also check the host name.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyChain(cs.PeerCertificates, r.cur.Load().pool, x509.ExtKeyUsageServerAuth)
		},
	}
}

func verifyChain(certs []*x509.Certificate, pool *x509.CertPool, usage x509.ExtKeyUsage) error {
	if len(certs) == 0 {
		return fmt.Errorf("%w: the peer sent none", ErrNoCertificate)
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}})
	if err != nil {
		return fmt.Errorf("tlsconf: peer certificate: %w", err)
	}
	return nil
}

// ClientConfig is what a client (CLI, Go client) dials with: the server's
// certificate must chain to the CA in caFile and name the host dialed.
// certFile and keyFile, when set, are presented as the client's identity.
func ClientConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pool, err := LoadPool(caFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if certFile != "" || keyFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("tlsconf: load client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// PeerName is the identity a verified client certificate gives: its
// Common Name ("" when there is none). Servers call it on a connection
// state whose chain tls already verified.
func PeerName(cs *tls.ConnectionState) string {
	if cs == nil || len(cs.VerifiedChains) == 0 || len(cs.PeerCertificates) == 0 {
		return ""
	}
	return cs.PeerCertificates[0].Subject.CommonName
}
