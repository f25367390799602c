package node

import (
	"context"

	"github.com/raftmq/raftmq/fsm"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/transport"
)

var _ transport.TopicUpdater = (*Node)(nil)

// UpdateTopic replicates a topic update: the queue count may only grow, the
// perm may change; 0 keeps a value (store.Store.UpdateTopic).
func (n *Node) UpdateTopic(ctx context.Context, t store.TopicConfig) error {
	_, err := n.applyCommand(ctx, &fsm.Command{Type: fsm.CmdUpdateTopic, Topic: t})
	return err
}
