package main

import (
	"crypto/tls"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/tlsconf"
)

// security is what the global TLS and token flags give.
type security struct {
	caFile, certFile, keyFile string
	token                     string
	tls                       *tls.Config // nil: plaintext; set by load
}

// securityFlags registers --tls-ca, --tls-cert, --tls-key and --token. The
// files default to their environment variables; the token is read from
// RAFTMQ_TOKEN only when the flag is not given, so help never prints it.
func securityFlags(s *security, pf *pflag.FlagSet) {
	pf.StringVar(&s.caFile, "tls-ca", os.Getenv("RAFTMQ_TLS_CA"),
		"dial TLS and trust this PEM CA bundle (env RAFTMQ_TLS_CA); the server's certificate must name the host dialled")
	pf.StringVar(&s.certFile, "tls-cert", os.Getenv("RAFTMQ_TLS_CERT"),
		"PEM client certificate to present, with --tls-key; implies TLS (env RAFTMQ_TLS_CERT)")
	pf.StringVar(&s.keyFile, "tls-key", os.Getenv("RAFTMQ_TLS_KEY"),
		"PEM key of --tls-cert (env RAFTMQ_TLS_KEY)")
	pf.StringVar(&s.token, "token", "",
		"bearer token sent with every call (env RAFTMQ_TOKEN, which keeps it out of ps); without TLS it crosses the network in the clear")
}

// load checks the flags and reads the TLS files: a missing, unreadable or
// malformed file is bad usage, reported before anything is dialled.
func (s *security) load(fs *pflag.FlagSet) error {
	if !fs.Changed("token") {
		s.token = os.Getenv("RAFTMQ_TOKEN")
	}
	if (s.certFile == "") != (s.keyFile == "") {
		return usagef("--tls-cert and --tls-key go together (got cert %q, key %q; env RAFTMQ_TLS_CERT, RAFTMQ_TLS_KEY)", s.certFile, s.keyFile)
	}
	if s.caFile == "" && s.certFile == "" {
		s.tls = nil
		return nil
	}
	if s.caFile != "" {
		if _, err := tlsconf.LoadPool(s.caFile); err != nil {
			return usagef("--tls-ca %s: %v", s.caFile, err)
		}
	}
	cfg, err := tlsconf.ClientConfig(s.caFile, s.certFile, s.keyFile)
	if err != nil {
		return usagef("--tls-cert %s, --tls-key %s: %v", s.certFile, s.keyFile, err)
	}
	s.tls = cfg
	return nil
}

// options are the client options of the security flags (load first).
func (s *security) options(probe, retry time.Duration) client.Options {
	return client.Options{TLS: s.tls, Token: s.token, ProbeTimeout: probe, RetryTimeout: retry}
}
