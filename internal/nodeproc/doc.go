// Package nodeproc starts real raftmq-node processes for end-to-end, chaos
// and benchmark tests: it builds the binaries once per test process, starts
// nodes with their output in a log file, signals them by PID (SIGKILL,
// SIGTERM, SIGSTOP, SIGCONT), reads their /status and /healthz, and forms
// N-node clusters on loopback (or on hosts of network namespaces a test made).
//
// Nothing it starts outlives the test: every Start is paired with a process
// that a Stop or Kill ends by PID, every wait is bounded by a context, and a
// process whose parent dies gets SIGKILL (Pdeathsig).
//
// Typical use:
//
//	bin, err := nodeproc.Build()
//	dir := nodeproc.TempDir(t, "e2e")
//	c, err := nodeproc.StartCluster(ctx, bin, nodeproc.ClusterOptions{N: 3, Dir: dir})
//	t.Cleanup(func() { _ = c.Stop(context.Background()) })
package nodeproc
