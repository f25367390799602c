// Package e2e holds the end-to-end tests of raftmq: real raftmq-node
// processes (built once per test run by internal/nodeproc) on loopback
// ports, driven through the Go client and the real raftmq CLI binary —
// topics, produce/consume with acknowledgement logs, consumer groups,
// queries, cluster status and leadership transfer, a leader kill -9 while a
// client produces, catch-up of the restarted node and an offline verify of
// the three data dirs, the README quick start on the default ports, the
// bad-input catalogue against a live cluster, and the docker compose
// cluster (skipped with a reason when no docker daemon is reachable).
//
// The package has no non-test code. `go test -short` skips it.
package e2e
