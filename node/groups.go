package node

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/membership"
	"github.com/raftmq/raftmq/transport"
)

// GroupMemberExpiry is how long a gRPC consumer stays a member of its group
// without a heartbeat (clients beat every few seconds; see client.Member).
const GroupMemberExpiry = 10 * time.Second

// newGroupMembers is the leader's table of gRPC consumer-group members.
// It lives in memory: after a leader change the members join the new
// leader's table at their next heartbeat.
func newGroupMembers() *membership.Table[struct{}] {
	return membership.New[struct{}](GroupMemberExpiry, nil)
}

// JoinGroup records a consumer's heartbeat (or its leaving) in the
// leader's member table and returns the group's live members
// (transport.GroupCoordinator).
func (n *Node) JoinGroup(_ context.Context, group, clientID string, leave bool) ([]string, time.Duration, error) {
	if n.raft.State() != raft.Leader {
		return nil, 0, fmt.Errorf("node %s: group members are tracked by the leader: %w", n.cfg.ID, transport.ErrNotLeader)
	}
	switch {
	case leave:
		n.groupMembers.Leave(group, clientID)
	case clientID != "":
		n.groupMembers.Beat(group, clientID, struct{}{})
	}
	return n.groupMembers.Members(group), GroupMemberExpiry, nil
}
