package main

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/raftmq/raftmq/tlsconf"
)

// defaultHosts are the subject alternative names of `certs issue` without
// --hosts: a node or client on this machine.
const defaultHosts = "127.0.0.1,localhost,::1"

// day is the unit of --days.
const day = 24 * time.Hour

func certsCmd(e *env) *cobra.Command {
	g := group("certs", "Make a cluster CA and issue node and client certificates (offline)", certsCACmd(e), certsIssueCmd(e))
	g.Long = `Make the cluster's certificate authority and issue certificates with it
(ECDSA P-256), offline: nothing is dialled. Every node presents a
certificate issued by the CA (its Common Name is the node's id) and
trusts the CA's certificate; a client trusts the CA too (--tls-ca) and
may present its own certificate, whose Common Name an auth file's
cert_cn names.

  raftmq certs ca --out certs
  raftmq certs issue n1 --out certs --ca-dir certs --hosts 10.0.0.1,node1.example
  raftmq certs issue orders-service --out certs --ca-dir certs

Keys are written mode 0600, directories made mode 0700. Existing files
are never overwritten unless --force.`
	g.Annotations = map[string]string{offline: "true"}
	return g
}

func certsCACmd(e *env) *cobra.Command {
	var out, name string
	var days int
	var force bool
	cmd := &cobra.Command{
		Use:   "ca --out DIR [--days N] [--name CN] [--force]",
		Short: "Make a new CA: DIR/ca.pem (give it to nodes and clients) and DIR/ca-key.pem (keep it secret)",
		Long: `Make a new self-signed certificate authority and write DIR/ca.pem, the
certificate every node and client trusts (--tls-ca), and DIR/ca-key.pem,
its private key (mode 0600), which signs certificates with
'raftmq certs issue': keep it off the nodes and secret. Refuses to
overwrite existing files unless --force.`,
		Args: noArgs,
		RunE: e.action(func(e *env, _ *cobra.Command, _ []string) error {
			if err := checkOutDays(out, days); err != nil {
				return err
			}
			return certsCA(e, out, name, days, force)
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&out, "out", "", "directory to write ca.pem and ca-key.pem into (made if missing)")
	fl.StringVar(&name, "name", "raftmq CA", "the CA's Common Name")
	fl.IntVar(&days, "days", 3650, "days the CA is valid")
	fl.BoolVar(&force, "force", false, "overwrite existing files")
	return cmd
}

func certsIssueCmd(e *env) *cobra.Command {
	var out, caDir, hosts string
	var days int
	var force bool
	cmd := &cobra.Command{
		Use:   "issue NAME --out DIR --ca-dir DIR [--hosts H,H...] [--days N] [--force]",
		Short: "Issue a certificate NAME (a node id or a client name) signed by the CA",
		Long: `Issue a certificate and key signed by the CA in --ca-dir (ca.pem and
ca-key.pem, as 'raftmq certs ca' writes them) and write DIR/NAME.pem and
DIR/NAME-key.pem (mode 0600). NAME is the certificate's Common Name: a
node's id for a node, for a client the name an auth file's cert_cn
refers to. The certificate is good for TLS servers and clients alike.

--hosts lists the IP addresses and DNS names the certificate is valid for
(default ` + defaultHosts + `): a node's must include every address
clients dial it by, since clients check the host name. Refuses to
overwrite existing files unless --force.`,
		Args: positional(1, 1, "certs issue NAME --out DIR --ca-dir DIR [--hosts H,H...] [--days N]"),
		RunE: e.action(func(e *env, _ *cobra.Command, args []string) error {
			if err := checkIssueArgs(args[0], out, caDir, days); err != nil {
				return err
			}
			return certsIssue(e, issueRequest{name: args[0], out: out, caDir: caDir,
				hosts: splitHosts(hosts), days: days, force: force})
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&out, "out", "", "directory to write NAME.pem and NAME-key.pem into (made if missing)")
	fl.StringVar(&caDir, "ca-dir", "", "directory holding the CA's ca.pem and ca-key.pem")
	fl.StringVar(&hosts, "hosts", defaultHosts, "comma-separated IP addresses and DNS names (subject alternative names)")
	fl.IntVar(&days, "days", 365, "days the certificate is valid")
	fl.BoolVar(&force, "force", false, "overwrite existing files")
	return cmd
}

func checkOutDays(out string, days int) error {
	if out == "" {
		return usagef("--out DIR is required")
	}
	if days < 1 || days > 100*365 {
		return usagef("--days %d out of range [1, %d]", days, 100*365)
	}
	return nil
}

func checkIssueArgs(name, out, caDir string, days int) error {
	if err := checkOutDays(out, days); err != nil {
		return err
	}
	if caDir == "" {
		return usagef("--ca-dir DIR is required (where 'raftmq certs ca' wrote ca.pem and ca-key.pem)")
	}
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) {
		return usagef("NAME %q cannot name a file (no slashes, not . or ..)", name)
	}
	return nil
}

// splitHosts splits --hosts at commas, dropping blanks.
func splitHosts(list string) []string {
	var hosts []string
	for _, h := range strings.Split(list, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

// certJSON is what `certs ca` and `certs issue` print with --json.
type certJSON struct {
	Name     string   `json:"name"`
	Cert     string   `json:"cert"`
	Key      string   `json:"key"`
	Hosts    []string `json:"hosts,omitempty"`
	NotAfter string   `json:"notAfter"`
}

func certsCA(e *env, out, name string, days int, force bool) error {
	certFile, keyFile := filepath.Join(out, "ca.pem"), filepath.Join(out, "ca-key.pem")
	if err := prepareOut(out, force, certFile, keyFile); err != nil {
		return err
	}
	notAfter := time.Now().Add(time.Duration(days) * day)
	ca, err := tlsconf.NewAuthority(name, notAfter)
	if err != nil {
		return err
	}
	if _, _, err := ca.WriteFiles(out); err != nil {
		return err
	}
	return e.reportCert(certJSON{Name: name, Cert: certFile, Key: keyFile, NotAfter: notAfter.UTC().Format(time.RFC3339)})
}

// issueRequest is what `certs issue` was asked for.
type issueRequest struct {
	name, out, caDir string
	hosts            []string
	days             int
	force            bool
}

func certsIssue(e *env, r issueRequest) error {
	caCert, caKey := filepath.Join(r.caDir, "ca.pem"), filepath.Join(r.caDir, "ca-key.pem")
	ca, err := tlsconf.LoadAuthority(caCert, caKey)
	if err != nil {
		return fmt.Errorf("load the CA from --ca-dir %s (make one with 'raftmq certs ca --out %s'): %w", r.caDir, r.caDir, err)
	}
	certFile, keyFile := filepath.Join(r.out, r.name+".pem"), filepath.Join(r.out, r.name+"-key.pem")
	if same(certFile, caCert) || same(keyFile, caKey) {
		return usagef("NAME %q in --out %s would overwrite the CA's files", r.name, r.out)
	}
	if err := prepareOut(r.out, r.force, certFile, keyFile); err != nil {
		return err
	}
	notAfter := time.Now().Add(time.Duration(r.days) * day)
	if caEnd, err := caNotAfter(ca); err == nil && notAfter.After(caEnd) {
		fmt.Fprintf(e.stderr, "raftmq: warning: the CA expires at %s, before the certificate would (--days %d); it is valid only until then\n",
			caEnd.UTC().Format(time.RFC3339), r.days)
	}
	leaf, err := ca.Issue(r.name, r.hosts, time.Now().Add(-time.Hour), notAfter)
	if err != nil {
		return err
	}
	if _, _, err := leaf.WriteFiles(r.out, r.name); err != nil {
		return err
	}
	return e.reportCert(certJSON{Name: r.name, Cert: certFile, Key: keyFile, Hosts: r.hosts,
		NotAfter: notAfter.UTC().Format(time.RFC3339)})
}

// prepareOut makes dir (mode 0700) if missing and refuses files that exist
// unless force, in which case it removes them (so the key is written anew
// with mode 0600 rather than keeping an old file's mode).
func prepareOut(dir string, force bool, files ...string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	for _, f := range files {
		_, err := os.Lstat(f)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return err
		case !force:
			return fmt.Errorf("%s exists: not overwritten (--force replaces it)", f)
		}
		if err := os.Remove(f); err != nil {
			return fmt.Errorf("--force: %w", err)
		}
	}
	return nil
}

// same reports whether two paths name the same file.
func same(a, b string) bool {
	aa, err1 := filepath.Abs(a)
	bb, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && aa == bb
}

// caNotAfter is the expiry of ca's certificate.
func caNotAfter(ca *tlsconf.Authority) (time.Time, error) {
	b, _ := pem.Decode(ca.CertPEM())
	if b == nil {
		return time.Time{}, errors.New("CA certificate is not PEM")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return time.Time{}, err
	}
	return c.NotAfter, nil
}

func (e *env) reportCert(c certJSON) error {
	if e.json {
		return e.emit(c)
	}
	fmt.Fprintf(e.stdout, "wrote %s and %s (%s, valid until %s)\n", c.Cert, c.Key, c.Name, c.NotAfter)
	return nil
}
