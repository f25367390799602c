package node

import (
	"errors"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// The node's Raft transport must never hand Raft a pipeline (see
// RaftTransport): Raft falls back to synchronous AppendEntries only when the
// transport answers with ErrPipelineReplicationNotSupported.
func TestRaftTransportRefusesPipelines(t *testing.T) {
	cfg := DefaultConfig()
	cfg.RaftAddr = "127.0.0.1:0"
	tr, err := NewRaftTransport(cfg, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	var _ raft.WithClose = tr
	var _ raft.WithPreVote = tr
	p, err := tr.AppendEntriesPipeline("n2", "127.0.0.1:1")
	if p != nil || !errors.Is(err, raft.ErrPipelineReplicationNotSupported) {
		t.Fatalf("AppendEntriesPipeline = %v, %v; want ErrPipelineReplicationNotSupported", p, err)
	}
}
