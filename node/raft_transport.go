package node

import (
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// RaftTransport is Raft's TCP transport without pipelined replication.
//
// hashicorp/raft v1.8's pipeline can deadlock: with the default
// MaxRPCsInFlight its channels are unbuffered, and when a follower answers
// Success=false the decode side stops reading while the send side parks on
// the next hand-off. The replication goroutine for that follower then never
// returns: heartbeats still flow, so the follower never calls an election,
// yet it receives no entry again, and Raft.Shutdown waits for it forever
// (hashicorp/raft #612; found by cluster-tests as a 20 s hung graceful stop
// with every goroutine parked in netPipeline.AppendEntries). Without the
// pipeline, Raft replicates with one AppendEntries RPC at a time per
// follower, each carrying up to MaxAppendEntries entries.
//
// The bench ceiling uses the same transport, so the comparison stays fair.
type RaftTransport struct {
	*raft.NetworkTransport
}

// NewRaftTransport listens on cfg.RaftAddr.
func NewRaftTransport(cfg Config, logger hclog.Logger) (*RaftTransport, error) {
	t, err := raft.NewTCPTransportWithConfig(cfg.RaftAddr, nil, &raft.NetworkTransportConfig{
		MaxPool: cfg.Raft.MaxPool, Timeout: cfg.Raft.TransportTimeout, Logger: logger,
	})
	if err != nil {
		return nil, err
	}
	return &RaftTransport{NetworkTransport: t}, nil
}

// AppendEntriesPipeline says pipelining is not supported; Raft then falls
// back to synchronous AppendEntries.
func (t *RaftTransport) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}
