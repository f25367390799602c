package node

import (
	"time"

	"github.com/hashicorp/raft"
)

// Announce pacing: poll often until the address is known, and after a
// successful announce give the entry time to be applied here before
// sending it again (every resend is one more Raft entry).
const (
	announcePoll   = 250 * time.Millisecond
	announceResend = 5 * time.Second
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
	t := time.NewTicker(announcePoll)
	defer t.Stop()
	var lastSent time.Time
	for attempt := 0; ; attempt++ {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		if n.fsm.Members()[n.cfg.ID] == n.APIAddr() {
			return
		}
		if time.Since(lastSent) < announceResend {
			continue
		}
		if srv, ok, _ := n.server(raft.ServerID(n.cfg.ID)); !ok || string(srv.Address) != n.RaftAddr() {
			continue // not (yet) a member here: joining is the operator's call
		}
		if err := n.joinVia(n.APIAddr()); err != nil {
			n.log.Debug("announcing API address failed, retrying", "attempt", attempt, "error", err)
			continue
		}
		lastSent = time.Now()
	}
}
