package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/fsm"
	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
	"github.com/raftmq/raftmq/transport"
)

// ErrCatchUp is returned when a joining server did not catch up in time; it
// stays a non-voter and its next Join attempt resumes the wait.
var ErrCatchUp = errors.New("node: joining server did not catch up")

// catchUpSlack is how far (in entries) a non-voter may trail the leader's
// last index and still be promoted.
const catchUpSlack = 64

// Join adds a server as a non-voter, waits until its applied index is
// within catchUpSlack of the leader's last index, then promotes it.
func (n *Node) Join(ctx context.Context, id, raftAddr, apiAddr string) error {
	if err := n.waitReady(ctx); err != nil {
		return err
	}
	if id == "" || raftAddr == "" {
		return fmt.Errorf("node: join needs an id and a raft address")
	}
	if err := n.checkJoin(id, raftAddr); err != nil {
		return err
	}
	if apiAddr != "" && n.fsm.Members()[id] != apiAddr {
		meta := fsm.Command{Type: fsm.CmdSetMemberMeta, MemberID: id, MemberAPIAddr: apiAddr}
		if _, err := n.applyCommand(ctx, &meta); err != nil {
			return err
		}
	}
	srv, found, err := n.server(raft.ServerID(id))
	if err != nil {
		return err
	}
	if found && srv.Address == raft.ServerAddress(raftAddr) && srv.Suffrage == raft.Voter {
		return nil // already a member: joining again is a no-op
	}
	if !found || srv.Address != raft.ServerAddress(raftAddr) {
		n.log.Info("adding non-voter", "id", id, "raft", raftAddr)
		if err := n.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, n.cfg.ApplyTimeout).Error(); err != nil {
			return mapRaftError(err)
		}
	}
	if err := n.waitCaughtUp(ctx, apiAddr); err != nil {
		return err
	}
	n.log.Info("promoting to voter", "id", id)
	if err := n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, n.cfg.ApplyTimeout).Error(); err != nil {
		return mapRaftError(err)
	}
	return nil
}

// checkJoin refuses, before anything is proposed, a join that would move
// an existing member to another Raft address or give a second member the
// Raft address of another.
func (n *Node) checkJoin(id, raftAddr string) error {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return mapRaftError(err)
	}
	for _, s := range f.Configuration().Servers {
		switch {
		case string(s.ID) == id && string(s.Address) != raftAddr:
			return status.Errorf(codes.AlreadyExists, "id %q is already a member at raft address %s; remove it first (cluster remove %s) to add it at %s", id, s.Address, id, raftAddr)
		case string(s.ID) != id && string(s.Address) == raftAddr:
			return status.Errorf(codes.AlreadyExists, "raft address %s already belongs to member %q; use another address or remove %s first", raftAddr, s.ID, s.ID)
		}
	}
	return nil
}

func (n *Node) server(id raft.ServerID) (raft.Server, bool, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return raft.Server{}, false, mapRaftError(err)
	}
	for _, s := range f.Configuration().Servers {
		if s.ID == id {
			return s, true, nil
		}
	}
	return raft.Server{}, false, nil
}

// waitCaughtUp polls the joiner's own status (its gRPC API) until its
// applied index is close to our last index, bounded by CatchUpTimeout.
func (n *Node) waitCaughtUp(ctx context.Context, apiAddr string) error {
	if apiAddr == "" {
		return nil // cannot observe it: promote at once (documented)
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.CatchUpTimeout)
	defer cancel()
	conn, err := grpc.NewClient(apiAddr, n.sec.peerDialOptions()...)
	if err != nil {
		return fmt.Errorf("node: dial joiner %s: %w", apiAddr, err)
	}
	defer conn.Close()
	cl := pb.NewRaftMQClient(conn)
	for {
		st, err := cl.Status(ctx, &pb.StatusRequest{})
		if err == nil && st.AppliedIndex+catchUpSlack >= n.raft.LastIndex() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w within %v (%s): %v", ErrCatchUp, n.cfg.CatchUpTimeout, apiAddr, err)
		case <-n.stop:
			return fmt.Errorf("node shutting down: %w", transport.ErrNotLeader)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Remove takes a server out of the configuration.
func (n *Node) Remove(ctx context.Context, id string) error {
	if err := n.waitReady(ctx); err != nil {
		return err
	}
	if _, found, err := n.server(raft.ServerID(id)); err != nil {
		return err
	} else if !found {
		return status.Errorf(codes.NotFound, "no member %q in the configuration; nothing removed", id)
	}
	if err := n.raft.RemoveServer(raft.ServerID(id), 0, n.cfg.ApplyTimeout).Error(); err != nil {
		return mapRaftError(err)
	}
	return nil
}

// Transfer hands leadership to id, or to the most current voter if id is "".
func (n *Node) Transfer(ctx context.Context, id string) error {
	if n.raft.State() != raft.Leader {
		return fmt.Errorf("node %s: %w", n.cfg.ID, transport.ErrNotLeader)
	}
	var f raft.Future
	if id == "" {
		f = n.raft.LeadershipTransfer()
	} else {
		srv, found, err := n.server(raft.ServerID(id))
		if err != nil {
			return err
		}
		if !found {
			return status.Errorf(codes.NotFound, "no member %q in the configuration; leadership stays with %s", id, n.cfg.ID)
		}
		if srv.ID == raft.ServerID(n.cfg.ID) {
			return nil // already the leader
		}
		f = n.raft.LeadershipTransferToServer(srv.ID, srv.Address)
	}
	n.setReady(false)
	err := f.Error()
	if err != nil && n.raft.State() == raft.Leader {
		// The transfer failed and this node still leads: serve again once a
		// barrier passes (a real change of leadership goes through leaderLoop).
		n.establish()
	}
	return err
}

// joinLoop asks the member at cfg.Join to add this node, retrying until it
// succeeds (the leader answers; a voter at the same Raft address is a
// no-op there) or the node stops. This node's own configuration is not
// asked: it can list this node as a voter when the cluster does not — a
// member removed while it was down keeps its old configuration, and a
// wiped member rejoining installs a snapshot taken before its removal and
// lists itself as a voter until the later entries arrive.
func (n *Node) joinLoop() {
	for attempt := 0; ; attempt++ {
		err := n.joinVia(n.cfg.Join)
		if err == nil {
			n.log.Info("joined cluster", "via", n.cfg.Join)
			return
		}
		n.log.Warn("join failed, retrying", "via", n.cfg.Join, "attempt", attempt, "error", err)
		select {
		case <-n.stop:
			return
		case <-time.After(min(time.Second<<min(attempt, 4), 10*time.Second)):
		}
	}
}

// joinVia asks the member serving the client API at target to join this
// node (an existing member at the same Raft address is only re-announced).
func (n *Node) joinVia(target string) error {
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.CatchUpTimeout+n.cfg.ApplyTimeout)
	watched := make(chan struct{})
	go func() { // cancel the call when the node stops
		defer close(watched)
		select {
		case <-n.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	defer func() { cancel(); <-watched }() // the watcher ends before we return
	conn, err := grpc.NewClient(target, n.sec.peerDialOptions()...)
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = pb.NewRaftMQClient(conn).Join(ctx, &pb.JoinRequest{Id: n.cfg.ID, RaftAddr: n.RaftAddr(), ApiAddr: n.APIAddr()})
	return err
}
