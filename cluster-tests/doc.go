// Package clustertest runs real raftmq-node processes under faults and checks
// that nothing acknowledged is lost, duplicated or inconsistent.
//
// The harness (internal/nodeproc) builds raftmq-node once and starts three
// nodes, each with its own data dir, ports and log. Faults come from a
// seeded schedule (internal/testseed):
//
//   - process faults: kill -9, SIGSTOP/SIGCONT pause, graceful restart,
//     leadership transfer, membership change (remove a follower, wipe its
//     dir, re-join it with --join);
//   - overlapping faults: a second kill while a node recovers, a kill of the
//     receiver or the sender during a snapshot install, a kill of the leader
//     during a membership change, a partition plus a kill;
//   - power loss, when the test runs as root with /dev/fuse: every node's
//     data dir is the root of its own lossyfs mount (cmd/lossyfs, package
//     internal/lossyfs), which keeps every write not yet fsynced and every
//     directory change whose directory was not yet fsynced in a volatile
//     layer. powerloss (one node), powerloss-majority (two at once) and
//     powerloss-all (the whole cluster) SIGKILL the nodes, abort their
//     FUSE connections so the kernel's dirty pages die, drop the volatile
//     layer (or, seeded, persist part of it torn at 512-byte sectors) and
//     restart them on what a disk would hold; the tally counts the bytes
//     and directory entries dropped, and a schedule whose power losses
//     dropped nothing is a problem;
//   - network faults, when the test runs as root and `ip netns` works: every
//     node runs in its own network namespace (rmqct-<pid>-nN) with a veth to
//     a bridge in a hub namespace; the test process reaches them through one
//     veth from the root namespace. One node isolated, the leader isolated, a
//     bridge partition (two nodes cannot talk, both still see the third) are
//     iptables DROP rules inside the node namespaces; added latency routes a
//     node's Raft connections through a delaying TCP proxy in the test
//     process (iptables DNAT; this kernel has no netem); dropped connections
//     are `ss -K` of established Raft connections plus random packet loss
//     (iptables statistic). Without root the network and power-loss faults
//     are skipped with a printed reason; with CI=true that is a failure.
//
// TestChaos runs the nodes secure by default: at test time the harness
// makes a CA, a certificate per node (for the node's IP, 127.0.0.1 and
// localhost) and an auth file (mode 0600: a random node_token and one admin
// user) in the run's pki/ directory — not in a data dir, which a power loss
// or a membership fault wipes — and starts every node, a re-joined one too,
// with --tls-cert, --tls-key, --tls-ca and --auth-file: TLS on the API and
// HTTP ports, mutual TLS on the Raft port and between nodes. The harness
// dials with the CA and the admin user's token (the Go client, direct gRPC
// connections, https polling of /status, pprof, the CLI). At the start and
// after healing it proves that every node refuses a plaintext gRPC call and
// a TLS call without a token, counts that refusal in /metrics scraped over
// https, does not serve plain http and keeps pprof for admins; the tally
// says how many schedules ran secure and counts security failures.
// -chaos.plain runs without TLS and auth. The other tests run plain.
//
// A workload runs throughout: idempotent producers with unique payloads
// record every acknowledged (msgId, topic, queueId, queueOffset), resending
// a batch whose outcome is unknown with the same producer sequences until
// it is known (up to a minute after the workload stops; a send still
// unknown then is a problem, "unresolved"), consumers long-poll every queue
// from offset 0, and a consumer
// group commits offsets. After healing every fault and waiting for the nodes
// to converge, the checker reads every queue from every node directly and
// checks: each acknowledged message is present exactly once at its
// acknowledged (queueId, queueOffset) with the same bytes on every node;
// queue offsets have no gaps; per-producer order holds within a queue;
// committed offsets never go backwards; unknown sends are present at most
// once and refused sends not at all; what consumers saw is what the queues
// hold; and after a graceful stop all replicas pass verify.Stores
// (byte-identical up to their common confirmOffset).
//
// Run the short schedule (CI) with
//
//	go test ./cluster-tests/ -run Chaos
//
// and the long mode with -chaos.duration=60m -chaos.maxbatch=12 (bigger
// producer sends, so a long run acknowledges millions of messages);
// -chaos.kinds=a,b focuses on some kinds; -chaos.plain turns TLS and auth
// off. TestFailover kills the leader
// 20 times and reports the time from kill to the first acknowledged write
// (RAFTMQ_FAILOVER_HEARTBEAT=shipped: with the node's default timeouts).
// A failing run prints its seed and keeps data dirs and logs.
package clustertest
