// Package layers holds the architecture test of the module: every package's
// imports of other raftmq packages point down the layering
//
//	cmd/*, bench                      binaries and the benchmark
//	internal/nodeproc, bench/ceiling  processes for tests and the bench
//	node, client, transport/transporttest
//	transport, broker, dashboard      gRPC API server and leader forwarding; RocketMQ
//	                                  remoting; the web dashboard
//	node/snapstore                    Raft snapshot store
//	fsm                               Raft FSM over the store
//	store, verify                     the message store facade; the offline check
//	recovery                          the recovery plan and the replay into derived files
//	consumequeue, index               derived files
//	commitlog                         the log of message records
//	mmap, wire, meta, internal/lossyfs  mapped files; the client-server contract;
//	                                  store metadata and admin commands; the lossy test file system
//	vfs, proto, message, remoting, tlsconf, auth, quota,
//	internal leaves                   imported by anything
//
// A package may import only packages of a lower layer (never one of its own
// layer, never one above). Test files are exempt: tests may drive a package
// from above. A second test holds the Go client to its leaves: `go list
// -deps ./client` has none of the storage engine (store, recovery,
// commitlog, consumequeue, index, mmap, vfs), fsm, node, transport or Raft.
// It has no code of its own.
package layers
