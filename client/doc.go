// Package client is the Go client of raftmq.
//
// New connects through any seed address, asks for the leader (Status) and
// sends writes there; reads go to the leader too unless Options.ReadFromAny.
//
// Retries. A write is sent again only when the error proves it was not
// proposed: the server answered "not leader" / "no leader" (an ErrorInfo of
// domain "raftmq"), or the connection was refused while dialing. The client
// then re-resolves the leader (using the hint in the error) and tries again
// with jittered backoff until Options.RetryTimeout (default 30 s) has passed
// or the call's context ends: the budget is time, not a count of tries,
// because an election lasts as long as it lasts. A write whose fate is
// unknown — codes.Unknown "outcome unknown", a deadline or a broken
// connection after sending — is sent again only when it is idempotent: a
// Send is (below), and so is CommitOffset. A Send that is still unknown
// when the budget or its context ends returns ErrOutcomeUnknown, never
// ErrUnavailable. Reads are always retried on another node.
//
// Idempotent sends. Every message carries this client's producer id and a
// sequence (the PSEQ property), unless Options.DisableIdempotence; the
// cluster stores each sequence once and answers a repeat with the first
// copy's result, so resending after an unknown outcome cannot duplicate.
// Fewer than Options.IdempotenceWindow sequences are outstanding at once
// (more Sends wait), which keeps every first attempt inside the cluster's
// window. Prepare stamps messages once, for a caller that resends them
// itself after an unknown outcome.
//
// Delayed delivery. WithDelay and WithDeliverAt ask the cluster to deliver
// a message later (up to 40 days); it is stored at once, in the schedule
// topic, and copied into its topic when due.
// A write whose context has no deadline still ends: each try is bounded by
// Options.RetryTimeout, after which its outcome is unknown.
//
// Messages. NewMessage builds a message; the client gives every message a
// unique RocketMQ-style id (UNIQ_KEY, 32 hex characters) unless it has one,
// and WithKeys/WithTag set the KEYS and TAGS properties the store indexes
// and filters on. Send stores a batch; the leader splits a batch larger than
// its group_commit.max_bytes into several Raft entries, so a Send is not
// atomic (results are per message, in order). A Producer batches SendAsync
// calls (MaxBatch messages, MaxBatchBytes bytes, Linger) with up to
// MaxInFlight Sends at once.
//
// Merging. Each Send RPC costs the client and the leader a gRPC call
// whatever it carries, so concurrent Sends beyond Options.MaxSendsInFlight
// (default 16) wait and leave together as one RPC when one returns, up to
// 1,024 messages or 4 MiB; a lone Send never waits. Each caller still gets
// only its own results and errors: a Send whose context ends while it waits
// is withdrawn (nothing sent); once merged its outcome is unknown like any
// sent one; a merged request refused as invalid is sent again Send by Send.
//
// Consumer groups. CommitOffset and QueryOffset store and read a group's
// offset in one queue; ListGroups and DescribeGroup show groups and, per
// queue, the committed offset, the queue's max offset and the lag;
// ResetGroup moves a group in every queue of a topic (earliest, latest, an
// offset, or the first message stored at or after a time, found with
// OffsetAtOrAfter) in one commit through Raft.
//
// Security. Options.TLS makes every connection TLS (nil: plaintext): the
// server's certificate must chain to the config's RootCAs and name the host
// dialled, and a client certificate in it names the client to the cluster
// (an auth file's cert_cn). Options.Token is sent as "authorization:
// Bearer <token>" with every call; without TLS it crosses the network in
// the clear, so do that only on a network you trust. tlsconf.ClientConfig
// reads the PEM files that `raftmq certs` writes:
//
//	cfg, err := tlsconf.ClientConfig("certs/ca.pem", "", "") // or a client cert and key
//	if err != nil {
//		return err
//	}
//	c, err := client.New(ctx, []string{"node1.example:9001"}, client.Options{
//		TLS:   cfg,
//		Token: os.Getenv("RAFTMQ_TOKEN"),
//	})
//
// A server that refuses the credential answers codes.Unauthenticated or
// codes.PermissionDenied, returned as is; a handshake that fails (unknown
// CA, wrong host name) is codes.Unavailable, as for a node that cannot be
// reached.
//
// Errors wrap ErrOutcomeUnknown, ErrUnavailable, ErrInvalid, ErrNotFound or
// ErrAlreadyExists together with the gRPC status error.
package client
