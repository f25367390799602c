package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	"github.com/raftmq/raftmq/fsm"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/transport"
)

// leaderLoop follows leadership: on gaining it, a Barrier makes the FSM
// current before writes are served; on losing it, writes stop at once.
func (n *Node) leaderLoop() {
	for {
		select {
		case <-n.stop:
			return
		case leader := <-n.raft.LeaderCh():
			n.setReady(false)
			if leader {
				n.establish()
			}
		}
	}
}

func (n *Node) establish() {
	for n.raft.State() == raft.Leader {
		start := time.Now()
		err := n.raft.Barrier(n.cfg.ApplyTimeout).Error()
		if err == nil {
			n.log.Info("leadership established", "barrier", time.Since(start), "term", n.raft.Stats()["term"])
			if n.electedAlone {
				n.electedAlone = false
				n.restoreHeartbeat()
			}
			n.setReady(true)
			n.announceSelf()
			n.proposeDedup()
			return
		}
		n.log.Warn("barrier after election failed", "error", err)
		select {
		case <-n.stop:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// announceSelf replicates this leader's API address so followers can
// forward writes to it (see doc.go, "Member API addresses").
func (n *Node) announceSelf() {
	if n.fsm.Members()[n.cfg.ID] == n.APIAddr() {
		return
	}
	cmd := fsm.Command{Type: fsm.CmdSetMemberMeta, MemberID: n.cfg.ID, MemberAPIAddr: n.APIAddr()}
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
	defer cancel()
	if _, err := n.applyCommand(ctx, &cmd); err != nil {
		n.log.Warn("announcing API address failed", "error", err)
	}
}

// proposeDedup makes this leader's [dedup] settings the cluster's when
// they differ from the replicated ones.
func (n *Node) proposeDedup() {
	want := n.cfg.Dedup.config()
	if n.Store().DedupConfig() == want {
		return
	}
	cmd := fsm.Command{Type: fsm.CmdSetDedup, Dedup: want}
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
	defer cancel()
	if _, err := n.applyCommand(ctx, &cmd); err != nil {
		n.log.Warn("proposing the [dedup] settings failed", "error", err)
		return
	}
	n.log.Info("dedup settings applied", "window", want.Window, "producer_expiry", n.cfg.Dedup.ProducerExpiry)
}

func (n *Node) setReady(v bool) {
	n.readyMu.Lock()
	defer n.readyMu.Unlock()
	if v == n.isReady.Load() {
		return
	}
	n.isReady.Store(v)
	if v {
		close(n.ready)
	} else {
		n.ready = make(chan struct{})
	}
}

// waitReady returns nil once this node is a leader that passed its barrier,
// or an error wrapping transport.ErrNotLeader if it is not the leader.
func (n *Node) waitReady(ctx context.Context) error {
	if n.isReady.Load() && n.raft.State() == raft.Leader { // the hot path: no timer, no lock
		return nil
	}
	for {
		if n.raft.State() != raft.Leader {
			return fmt.Errorf("node %s: %w", n.cfg.ID, transport.ErrNotLeader)
		}
		n.readyMu.Lock()
		ch := n.ready
		n.readyMu.Unlock()
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-n.stop:
			return fmt.Errorf("node %s shutting down: %w", n.cfg.ID, transport.ErrNotLeader)
		case <-time.After(50 * time.Millisecond): // re-check the raft state
		}
	}
}

// applyCommand proposes one encoded command and waits for its response,
// bounded by ctx (and ApplyTimeout when ctx has no deadline).
func (n *Node) applyCommand(ctx context.Context, cmd *fsm.Command) (*fsm.ApplyResponse, error) {
	if err := n.waitReady(ctx); err != nil {
		return nil, err
	}
	data, err := cmd.Encode(nil)
	if err != nil {
		return nil, err
	}
	f := n.raft.Apply(data, n.cfg.ApplyTimeout)
	return n.waitApply(ctx, f)
}

// waitApply waits for f and maps Raft's errors to the transport's.
func (n *Node) waitApply(ctx context.Context, f raft.ApplyFuture) (*fsm.ApplyResponse, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, n.cfg.ApplyTimeout)
		defer cancel()
	}
	done := make(chan error, 1)
	n.goroutine(func() { done <- f.Error() }) // ends when raft resolves f (at the latest on Shutdown)
	select {
	case err := <-done:
		if err != nil {
			return nil, mapRaftError(err)
		}
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %v", transport.ErrOutcomeUnknown, ctx.Err())
	}
	resp, _ := f.Response().(*fsm.ApplyResponse)
	if resp == nil {
		return nil, fmt.Errorf("%w: no response from the state machine", transport.ErrOutcomeUnknown)
	}
	if errors.Is(resp.Err, store.ErrAlreadyApplied) { // stored before a full disk stopped it, results lost
		return nil, fmt.Errorf("%w: %w", transport.ErrOutcomeUnknown, resp.Err)
	}
	return resp, resp.Err
}

// mapRaftError says whether a failed proposal may still commit.
func mapRaftError(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return fmt.Errorf("%w: %v", transport.ErrNotLeader, err) // never entered the log
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("node: %w", err) // never entered the log
	case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrRaftShutdown),
		errors.Is(err, raft.ErrAbortedByRestore):
		return fmt.Errorf("%w: %v", transport.ErrOutcomeUnknown, err)
	}
	return fmt.Errorf("%w: %v", transport.ErrOutcomeUnknown, err)
}
