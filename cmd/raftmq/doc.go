// Command raftmq is the command-line client and admin tool of raftmq.
//
//	raftmq [--server host:port[,...]] [--tls-ca FILE [--tls-cert FILE --tls-key FILE]] [--token T]
//	       [--json] [--debug] [--quiet] COMMAND ...
//
// Commands (scripts depend on these names; `raftmq COMMAND --help` for each):
//
//	topic create T --queues 8 | update T [--queues N] [--perm P] | list | describe T | delete T
//	produce -t T -n 10000 -s 1024 [--key K] [--tag TAG] [--body B] [--ack-log FILE] [--batch B] [-c C]
//	consume -t T [-q Q] [--from OFFSET | --from-time RFC3339 | --group G] [-n N] [--to-end] [--tag TAG]
//	group list | describe G [-t T] | reset G -t T --to-time RFC3339 | --to-offset N | --to-earliest | --to-latest
//	query --key K -t T | --msg-id ID
//	cluster status | join ID RAFTADDR APIADDR | remove ID | transfer [ID]
//	bench produce|consume|e2e -t T -n N -s SIZE -c C [--duration D] [--rate R] [--batch B]
//	verify DIR [DIR...]
//	certs ca --out DIR [--days N] | issue NAME --out DIR --ca-dir DIR [--hosts H,...] [--days N]
//	auth token | hash TOKEN|- | check FILE
//	completion bash|zsh|fish|powershell
//
// The command tree is spf13/cobra: help at every level (exit 0), --version,
// shell completion. Global flags may be given before or after the command.
// --server defaults to RAFTMQ_SERVER, else 127.0.0.1:9001; every address is
// checked to be host:port before anything is dialled. Errors are one line
// (the gRPC status chain is cut to its innermost description; --debug
// prints all of it).
//
// --tls-ca (env RAFTMQ_TLS_CA) makes the client dial TLS and trust that
// CA; --tls-cert and --tls-key (RAFTMQ_TLS_CERT, RAFTMQ_TLS_KEY) present a
// client certificate; --token (RAFTMQ_TOKEN, read only when the flag is
// absent, so help never shows it) is sent as "authorization: Bearer" with
// every call, in the clear without TLS. The files are read before anything
// is dialled; a missing or malformed one is bad usage (exit 2). certs and
// auth work offline: certs ca makes a CA (ca.pem, ca-key.pem), certs issue
// a certificate NAME.pem and NAME-key.pem signed by it (NAME is its Common
// Name: a node's id, or the client name an auth file's cert_cn refers to),
// neither overwriting files without --force; auth token prints a new
// token and its token_sha256, auth hash a token's, auth check parses an
// auth file (exit 1 when it is bad).
//
// produce gives every message a unique id (UNIQ_KEY) and, without --body, a
// body of -s bytes that starts with that id; --ack-log gets
// "msgId\ttopic\tqueueId\tqueueOffset" per acknowledged message and
// "msgId\ttopic\t?\t?" when the outcome is unknown. consume starts at each
// queue's min offset unless --from, --from-time (the first message stored
// at or after it) or --group says otherwise; in group mode it commits the
// offset after each batch it printed and, without -q, is a member of the
// group: it beats to the leader every 2 s and reads only the queues the
// live members' averaging gives it, so consumers of one group split the
// queues. group describe shows per queue the committed offset, the max
// offset and the lag (max - committed), and the group's live members; group
// reset moves a group's offsets in every queue of a topic in one commit,
// backwards too. bench records
// latencies in an HdrHistogram; with --rate it runs open loop and measures
// from each batch's due time. Long operations print progress to stderr: a
// line rewritten every second on a terminal, a plain line every 10 s
// otherwise, nothing with --quiet. cluster status exits 1 when the cluster
// has no leader (the compose healthcheck relies on it).
//
// Exit status: 0 success, 1 the operation failed, 2 bad usage.
package main
