package node

import (
	"context"
	"fmt"

	"github.com/raftmq/raftmq/transport"
)

var _ transport.LeaderReader = (*Node)(nil)

// VerifyLeaderRead lets a read that must not go back in time (a consumer
// group's committed offset) be served from the local store: this node is the
// leader, it has applied everything committed before its term (its barrier),
// and a quorum confirms that no newer leader exists (raft.VerifyLeader). So
// every write acknowledged before the read started is visible. Any failure
// wraps transport.ErrNotLeader and the server forwards the read.
func (n *Node) VerifyLeaderRead(ctx context.Context) error {
	if err := n.waitReady(ctx); err != nil {
		return err
	}
	f := n.raft.VerifyLeader()
	done := make(chan error, 1)
	n.goroutine(func() { done <- f.Error() }) // raft resolves f, at the latest on Shutdown
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("node %s: verify leadership: %v: %w", n.cfg.ID, err, transport.ErrNotLeader)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
