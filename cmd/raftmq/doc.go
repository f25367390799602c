// Command raftmq is the command-line client and admin tool of raftmq.
//
//	raftmq [--server host:port[,...]] [--json] [--debug] [--quiet] COMMAND ...
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
//	completion bash|zsh|fish|powershell
//
// The command tree is spf13/cobra: help at every level (exit 0), --version,
// shell completion. Global flags may be given before or after the command.
// --server defaults to RAFTMQ_SERVER, else 127.0.0.1:9001; every address is
// checked to be host:port before anything is dialled. Errors are one line
// (the gRPC status chain is cut to its innermost description; --debug
// prints all of it).
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
