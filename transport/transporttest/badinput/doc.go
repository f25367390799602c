// Package badinput is the catalogue of requests every raftmq API server must
// refuse before touching its backend: one Case per bad field of every RPC,
// each expecting codes.InvalidArgument. It is shared by the transport
// package's own test (against a recording backend) and the end-to-end test
// (against a live three-node cluster), so the two cannot drift apart.
//
// It imports neither transport nor node (transport's internal test imports
// it), so the limits come in as a Limits value built from transport's
// constants.
package badinput
