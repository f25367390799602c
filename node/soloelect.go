package node

import (
	"github.com/hashicorp/raft"
)

// A node that is the only voter of its cluster has no one to hear from, yet
// hashicorp/raft waits out a heartbeat timeout (0.75–1.5 s with the
// defaults) before it calls the election it is sure to win. On restart such
// a node shortens its heartbeat timeout to the leader lease (the least
// Raft accepts): Raft then checks for a leader at once, finds none and
// elects itself; establish puts the configured timeout back once this
// node leads. Members of larger clusters keep the configured timeout.

// electAlone starts the election at once when this node is the only voter
// of its configuration, and reports whether it did.
func (n *Node) electAlone() bool {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	voters, self := 0, false
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			voters++
			self = self || s.ID == raft.ServerID(n.cfg.ID)
		}
	}
	if voters != 1 || !self {
		return false
	}
	rc := n.raft.ReloadableConfig()
	rc.HeartbeatTimeout = n.cfg.Raft.LeaderLeaseTimeout
	if err := n.raft.ReloadConfig(rc); err != nil {
		n.log.Warn("cannot shorten the heartbeat timeout for a single-voter election", "error", err)
		return false
	}
	n.log.Info("only voter: electing itself without waiting a heartbeat timeout")
	return true
}

// restoreHeartbeat puts the configured heartbeat timeout back after
// electAlone.
func (n *Node) restoreHeartbeat() {
	rc := n.raft.ReloadableConfig() // trailing logs may have been resized meanwhile
	rc.HeartbeatTimeout = n.cfg.Raft.HeartbeatTimeout
	if err := n.raft.ReloadConfig(rc); err != nil {
		n.log.Warn("cannot restore the heartbeat timeout", "error", err)
	}
}
