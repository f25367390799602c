// Package wire is the contract between raftmq's gRPC server (transport/)
// and its clients beyond the protobuf messages: a node's status as the
// Status call reports it (ClusterStatus, Member), the retry reasons the
// server attaches to errors raised before anything was proposed
// (RetryReason, NotSent), and the message size limits both sides set.
//
// It is a leaf: it imports grpc's status types and nothing of the storage
// engine, so an application that links the Go client (client/) does not
// link store, commitlog or Raft. The record format a Pull returns is
// message's, also a leaf.
package wire
