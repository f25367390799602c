package node

import (
	"time"

	"github.com/hashicorp/raft"
)

// announceLoop makes this member's client API address known to the cluster
// when nobody else will: a bootstrapped follower (or one restarted with a
// new API address) is not announced by a Join, and the leader only
// announces itself. It sends Join(id, raftAddr, apiAddr) to its own API
// server, which forwards it to the leader; for an existing member at the
// same Raft address that Join only records the API address. It never adds
// a server that is not already in the configuration, and ends once the
// replicated member map holds the address or the node stops.
func (n *Node) announceLoop() {
	for attempt := 0; ; attempt++ {
		select {
		case <-n.stop:
			return
		case <-time.After(min(250*time.Millisecond<<min(attempt, 5), 10*time.Second)):
		}
		if n.fsm.Members()[n.cfg.ID] == n.APIAddr() {
			return
		}
		if srv, ok, _ := n.server(raft.ServerID(n.cfg.ID)); !ok || string(srv.Address) != n.RaftAddr() {
			continue // not (yet) a member here: joining is the operator's call
		}
		if err := n.joinVia(n.APIAddr()); err != nil {
			n.log.Debug("announcing API address failed, retrying", "attempt", attempt, "error", err)
		}
	}
}
