package node

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/raftmq/raftmq/auth"
	"github.com/raftmq/raftmq/tlsconf"
	"github.com/raftmq/raftmq/transport"
)

// security is a node's TLS material and auth policy; either may be nil
// (plain text, no authentication: the defaults).
type security struct {
	tls  *tlsconf.Reloader
	auth *auth.Authenticator
}

func openSecurity(cfg Config) (security, error) {
	var s security
	var err error
	if cfg.tlsFiles().Enabled() {
		if s.tls, err = tlsconf.Load(cfg.tlsFiles()); err != nil {
			return s, fmt.Errorf("node: %w", err)
		}
	}
	if cfg.AuthFile != "" {
		if s.auth, err = auth.Open(cfg.AuthFile, nil); err != nil {
			return s, fmt.Errorf("node: %w", err)
		}
		if s.auth.NodeToken() == "" {
			return s, fmt.Errorf("node: %w: auth file %s has no node_token (nodes present it to each other)", ErrConfig, cfg.AuthFile)
		}
	}
	return s, nil
}

// Reload reads the TLS files and the auth file again (SIGHUP). What fails
// to load leaves the material in force unchanged; the error says why.
func (n *Node) Reload() error {
	var errs []string
	if n.sec.tls != nil {
		if err := n.sec.tls.Reload(); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if n.sec.auth != nil {
		if err := n.sec.auth.Reload(); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		n.log.Error("reload failed; the old material stays in force", "error", strings.Join(errs, "; "))
		return fmt.Errorf("node: reload: %s", strings.Join(errs, "; "))
	}
	n.log.Info("reloaded", "tls", n.sec.tls != nil, "auth", n.sec.auth != nil)
	return nil
}

// peerDialOptions dial another node's API: mutual TLS with the cluster CA
// when TLS is on, and the node token when authentication is on.
func (s security) peerDialOptions() []grpc.DialOption {
	creds := insecure.NewCredentials()
	if s.tls != nil {
		creds = credentials.NewTLS(s.tls.PeerConfig())
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if s.auth != nil {
		opts = append(opts, grpc.WithPerRPCCredentials(nodeToken{s.auth}))
	}
	return opts
}

// nodeToken presents the auth file's node_token (the newest one loaded).
type nodeToken struct{ a *auth.Authenticator }

func (t nodeToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{transport.MetadataAuthorization: "Bearer " + t.a.NodeToken()}, nil
}

// RequireTransportSecurity is false: without TLS the token travels in
// plain text, as every other byte does (the README's threat model).
func (nodeToken) RequireTransportSecurity() bool { return false }

// serverOptions are the API server's credentials: TLS asking for an
// optional client certificate (it names the client to the auth policy).
func (s security) serverOptions() []grpc.ServerOption {
	if s.tls == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.Creds(credentials.NewTLS(s.tls.ServerConfig(tls.VerifyClientCertIfGiven)))}
}

// listen opens a client-facing TCP listener (HTTP, remoting), with TLS when on.
func (s security) listen(addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil || s.tls == nil {
		return l, err
	}
	return tls.NewListener(l, s.tls.ServerConfig(tls.VerifyClientCertIfGiven)), nil
}

// peerTLS is the client config of node-to-node connections (nil: plain).
func (s security) peerTLS() *tls.Config {
	if s.tls == nil {
		return nil
	}
	return s.tls.PeerConfig()
}

// raftTLS are the Raft port's configs: every connection is mutual TLS with
// the cluster CA (nil, nil: plain TCP).
func (s security) raftTLS() (server, client *tls.Config) {
	if s.tls == nil {
		return nil, nil
	}
	return s.tls.ServerConfig(tls.RequireAndVerifyClientCert), s.tls.PeerConfig()
}

// requireAdmin guards an HTTP handler when authentication is on: the
// caller must be an admin, by a bearer token, HTTP basic auth (any user
// name, the token as password: browsers ask for it) or a verified client
// certificate. /healthz, /status and /metrics stay open (probes and
// scrapers); the dashboard and pprof are wrapped.
func (s security) requireAdmin(h http.Handler) http.Handler {
	if s.auth == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := s.httpPrincipal(r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Basic realm="raftmq", charset="UTF-8"`)
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		if err := p.Check(auth.Admin, ""); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (s security) httpPrincipal(r *http.Request) (*auth.Principal, error) {
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return s.auth.Token(strings.TrimSpace(tok))
	}
	if _, pw, ok := r.BasicAuth(); ok {
		return s.auth.Token(pw)
	}
	if cn := tlsconf.PeerName(r.TLS); cn != "" {
		return s.auth.Cert(cn)
	}
	return s.auth.Token("")
}
