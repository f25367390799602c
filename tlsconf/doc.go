// Package tlsconf holds a node's TLS material and hands out tls.Configs
// that always use the newest of it.
//
// A Reloader reads a certificate, its key and a CA bundle from files. Its
// server configs (for the gRPC API, HTTP, remoting and the Raft port) and
// its peer configs (node to node: Raft, forwarding, joining) look the
// material up on every handshake, so Reload (on SIGHUP) rotates
// certificates without a restart; a Reload that fails keeps the old
// material and reports why. Connections already open keep the certificate
// they were made with.
//
// Trust between nodes is the cluster CA: a peer config presents the node's
// certificate and accepts a server whose chain leads to the CA, and a
// server config with RequireAndVerifyClientCert accepts only clients with
// such a chain. Host names are not checked between nodes (members are
// addressed by IP as often as by name; holding a certificate of the
// cluster's private CA is what makes a member). Clients (the CLI, the Go
// client) use ClientConfig, which checks the server's host name as well.
//
// Authority makes a CA and issues certificates (ECDSA P-256): `raftmq
// certs` and the tests use it.
package tlsconf
