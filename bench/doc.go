// Command bench measures raftmq against its ceiling in one run on this
// machine and writes docs/performance.md and docs/performance.json.
//
//	go run ./bench                      # full run (≈ 10 min), writes docs/
//	go run ./bench -quick               # smoke run (small counts, and the nodes on
//	                                    # small store files: 64 MiB segments), writes to -out
//	go run ./bench -baseline 84a99e6    # also: the headline produce rows against
//	                                    # raftmq built at that revision, A/B
//	go run ./bench -rows '^$' -steps restarts -out DIR
//	                                    # only the kill -9 restart matrix: a single
//	                                    # node and a follower after 1, 4 and 16 GiB
//	                                    # of 1 KiB and of 1 MiB messages (≈ 25 min)
//	go run ./bench -rows '^$' -steps restarts -kill-cases 'single node, 1 KiB' -kill-sizes 1024,4096 -keep
//	                                    # one column of it, at 1 and 4 GiB; the kept
//	                                    # node logs (info level) show each restart's
//	                                    # phases
//
// The rows run on the node's default Raft log store (raft-wal); -boltdb
// (on by default in a full run) repeats the storage-bound rows on
// raft-boltdb as information.
//
// It builds raftmq-node, raftmq and bench/ceiling, starts a three-node
// raftmq cluster and a three-node bare hashicorp/raft cluster (no-op FSM,
// the node's own Raft config and log store: node.BuildRaftConfig,
// node.OpenRaftStore) as real processes on loopback (internal/nodeproc),
// and runs every row against both, alternating which goes first (A/B) and
// repeating, so noise from the other work on the machine hits both sides.
// raftmq load comes from the raftmq CLI (`raftmq bench`) in its own
// process over gRPC; the ceiling's load runs inside its leader process,
// calling raft.Apply with entries of the same size and concurrency.
//
// The analysis of misses (profiles, what would close them) lives in
// bench/notes.md and is copied into docs/performance.md.
package main
