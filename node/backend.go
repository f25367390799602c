package node

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/fsm"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/transport"
	"github.com/raftmq/raftmq/wire"
)

var _ transport.Backend = (*Node)(nil)

// Send validates msgs (bad input never reaches the Raft log) and group-commits
// them through Raft.
func (n *Node) Send(ctx context.Context, msgs []message.Message) ([]store.PutResult, error) {
	if n.raft.State() != raft.Leader {
		return nil, fmt.Errorf("node %s: %w", n.cfg.ID, transport.ErrNotLeader)
	}
	if len(msgs) == 0 {
		return nil, nil
	}
	if len(msgs) > n.cfg.GroupCommit.MaxMessages {
		return nil, fmt.Errorf("node: %d messages in one send > %d: %w", len(msgs), n.cfg.GroupCommit.MaxMessages, fsm.ErrTooLarge)
	}
	start := time.Now()
	st := n.Store()
	if err := n.checkDiskRoom(); err != nil {
		n.metrics.refusedDiskFull.Inc()
		return nil, err
	}
	for i := range msgs {
		if err := st.ValidateMessage(&msgs[i]); err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
	}
	res, err := n.batcher.send(ctx, msgs)
	if err == nil {
		n.metrics.observeStage(stageSend, time.Since(start))
		n.metrics.observeTopics(msgs)
	}
	return res, err
}

// diskReadEvery bounds how old the disk usage a send is checked against
// may be: a fast producer can fill the headroom above DiskWarningRatio
// faster than the store's flush tick reads it.
const diskReadEvery = 50 * time.Millisecond

// diskUsedPercent is the used share of this node's store disk, at most
// diskReadEvery old, or 100 while its FSM waits for space to apply an
// entry.
func (n *Node) diskUsedPercent() int {
	if n.fsm.Stats().WaitingForSpace {
		return 100
	}
	now := time.Now().UnixNano()
	if now-n.diskReadAt.Load() >= int64(diskReadEvery) {
		n.diskUsed.Store(int64(n.Store().ReadDiskUsedPercent()))
		n.diskReadAt.Store(now)
	}
	return int(n.diskUsed.Load())
}

// checkDiskRoom refuses a send (transport.ErrDiskFull) when this node's
// disk, or the disks of so many voters that no quorum is left with room,
// are at or above [store] DiskWarningRatio (peers as they last reported).
func (n *Node) checkDiskRoom() error {
	limit := n.cfg.Store.DiskWarningRatio
	if used := n.diskUsedPercent(); used >= limit {
		return fmt.Errorf("node %s: disk %d%% used, at or above [store] DiskWarningRatio = %d; sends are refused until retention or a topic delete frees space: %w",
			n.cfg.ID, used, limit, transport.ErrDiskFull)
	}
	full := n.peers.full(limit, time.Now())
	if len(full) == 0 {
		return nil
	}
	cfg := n.raft.GetConfiguration()
	if cfg.Error() != nil {
		return nil
	}
	voters, fullVoters := 0, []string{}
	for _, s := range cfg.Configuration().Servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		voters++
		if used, ok := full[string(s.ID)]; ok {
			fullVoters = append(fullVoters, fmt.Sprintf("%s (%d%%)", s.ID, used))
		}
	}
	if voters-len(fullVoters) >= voters/2+1 {
		return nil
	}
	sort.Strings(fullVoters)
	return fmt.Errorf("node %s: disks at or above [store] DiskWarningRatio = %d%% on %s, leaving no quorum of %d voters with room; sends are refused until retention or a topic delete frees space: %w",
		n.cfg.ID, limit, strings.Join(fullVoters, ", "), voters, transport.ErrDiskFull)
}

// CommitOffsets replicates consumer-group offsets.
func (n *Node) CommitOffsets(ctx context.Context, commits []store.OffsetCommit) error {
	_, err := n.applyCommand(ctx, &fsm.Command{Type: fsm.CmdCommitOffsets, Commits: commits})
	return err
}

// CreateTopic replicates a topic's creation (or its new config if it exists
// and the store treats creation of an existing topic as an update).
func (n *Node) CreateTopic(ctx context.Context, t store.TopicConfig) error {
	_, err := n.applyCommand(ctx, &fsm.Command{Type: fsm.CmdCreateTopic, Topic: t})
	return err
}

// DeleteTopic replicates a topic's deletion.
func (n *Node) DeleteTopic(ctx context.Context, name string) error {
	_, err := n.applyCommand(ctx, &fsm.Command{Type: fsm.CmdDeleteTopic, TopicName: name})
	return err
}

// Store is the local store (replaced when a snapshot is installed).
func (n *Node) Store() *store.Store { return n.fsm.Store() }

// Reader is the read side of the local store, what the API serves.
func (n *Node) Reader() store.Reader { return n.fsm.Store() }

// Status is this node's view of itself and the cluster.
func (n *Node) Status() wire.ClusterStatus {
	stats := n.raft.Stats()
	leaderAddr, leaderID := n.raft.LeaderWithID()
	members := n.fsm.Members()
	s := wire.ClusterStatus{
		ID:             n.cfg.ID,
		State:          n.raft.State().String(),
		LeaderID:       string(leaderID),
		LeaderRaftAddr: string(leaderAddr),
		LeaderAPIAddr:  members[string(leaderID)],
		Term:           parseUint(stats["term"]),
		CommitIndex:    n.raft.CommitIndex(),
		AppliedIndex:   n.raft.AppliedIndex(),
	}
	if leaderID == raft.ServerID(n.cfg.ID) {
		s.LeaderAPIAddr = n.APIAddr()
	}
	ss := n.Store().Stats()
	s.ConfirmOffset, s.MinOffset, s.MaxOffset = ss.ConfirmOffset, ss.MinOffset, ss.MaxOffset
	if idx := ss.AppliedIndex; idx < s.AppliedIndex {
		s.AppliedIndex = idx // raft's lastApplied moves before the FSM has applied
	}
	s.Members = n.members(members)
	s.DiskUsedPercent = n.diskUsedPercent()
	s.RemotingAddr = n.RemotingAddr()
	return s
}

func (n *Node) members(api map[string]string) []wire.Member {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	var out []wire.Member
	for _, srv := range f.Configuration().Servers {
		m := wire.Member{ID: string(srv.ID), RaftAddr: string(srv.Address), APIAddr: api[string(srv.ID)]}
		if string(srv.ID) == n.cfg.ID {
			m.APIAddr = n.APIAddr()
		}
		switch srv.Suffrage {
		case raft.Voter:
			m.Suffrage = wire.SuffrageVoter
		case raft.Nonvoter:
			m.Suffrage = wire.SuffrageNonvoter
		default:
			m.Suffrage = wire.SuffrageStaging
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func parseUint(s string) uint64 {
	v, _ := strconv.ParseUint(s, 10, 64)
	return v
}
