package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
	"github.com/raftmq/raftmq/wire"
)

// Send stores msgs as one batch on the leader. Messages without an ID get
// a fresh one. The error is for the whole batch: ErrOutcomeUnknown means
// some or all of it may have been stored. Per-message failures are in
// SendResult.Err. Concurrent Sends beyond Options.MaxSendsInFlight travel
// together in one RPC; each still gets only its own results and errors.
func (c *Client) Send(ctx context.Context, msgs ...Message) ([]SendResult, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	protos := make([]*pb.Message, len(msgs))
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		if m.ID == "" {
			m.ID = c.ids.Next()
		}
		ids[i] = m.ID
		protos[i] = m.toProto()
	}
	n := unstamped(protos)
	if n > 0 && c.seq != nil {
		base, err := c.seq.acquire(ctx, n)
		if err != nil {
			return nil, err
		}
		defer c.seq.release(base)
		c.seq.stamp(protos, base)
	}
	results, err := c.sends.send(ctx, protos, n == 0 || c.seq != nil) // every message carries a PSEQ
	if err != nil {
		return nil, err
	}
	out := make([]SendResult, len(msgs))
	for i, r := range results {
		out[i] = SendResult{MsgID: ids[i], OffsetMsgID: r.GetOffsetMsgId(), Topic: r.GetTopic(),
			QueueID: r.GetQueueId(), QueueOffset: r.GetQueueOffset(), PhysicalOffset: r.GetPhysicalOffset(),
			StoreTimestamp: r.GetStoreTimestamp()}
		if r.GetErrorCode() != 0 {
			out[i].Err = fmt.Errorf("%w: message %d: %s", ErrInvalid, i, r.GetError())
		}
	}
	return out, nil
}

// PullStatus is the outcome of a pull (RocketMQ's GetMessageStatus).
type PullStatus = pb.PullStatus

// Pull statuses.
const (
	StatusFound               = pb.PullStatus_PULL_STATUS_FOUND
	StatusNoMatchedMessage    = pb.PullStatus_PULL_STATUS_NO_MATCHED_MESSAGE
	StatusOffsetTooSmall      = pb.PullStatus_PULL_STATUS_OFFSET_TOO_SMALL
	StatusOffsetOverflowOne   = pb.PullStatus_PULL_STATUS_OFFSET_OVERFLOW_ONE
	StatusOffsetOverflowBadly = pb.PullStatus_PULL_STATUS_OFFSET_OVERFLOW_BADLY
	StatusNoMatchedQueue      = pb.PullStatus_PULL_STATUS_NO_MATCHED_LOGIC_QUEUE
	StatusNoMessageInQueue    = pb.PullStatus_PULL_STATUS_NO_MESSAGE_IN_QUEUE
)

// PullRequest asks for messages of one queue from Offset on.
type PullRequest struct {
	Topic       string
	QueueID     int32
	Offset      int64
	MaxMessages int32         // 0: 32
	MaxBytes    int32         // 0: 4 MiB
	MaxWait     time.Duration // long poll when nothing is there yet; 0 returns at once
	Tag         string        // "" or "*": all; "a||b": either
}

// PullResult is what a pull returned; continue from NextOffset.
type PullResult struct {
	Status     PullStatus
	NextOffset int64
	MinOffset  int64
	MaxOffset  int64
	Messages   []ReceivedMessage
}

// Pull reads messages (long-polling up to MaxWait).
func (c *Client) Pull(ctx context.Context, req PullRequest) (PullResult, error) {
	b, err := c.PullBatch(ctx, req)
	if err != nil {
		return PullResult{}, err
	}
	ms, err := b.Messages()
	if err != nil {
		return PullResult{}, err
	}
	return PullResult{Status: b.Status, NextOffset: b.NextOffset, MinOffset: b.MinOffset,
		MaxOffset: b.MaxOffset, Messages: ms}, nil
}

// CommitOffset stores a consumer group's offset for a queue through Raft.
// It is idempotent, so it is retried after an unknown outcome too.
func (c *Client) CommitOffset(ctx context.Context, group, topic string, queueID int32, offset int64) error {
	req := &pb.CommitOffsetRequest{Commits: []*pb.OffsetCommit{{Group: group, Topic: topic, QueueId: queueID, Offset: offset}}}
	return c.write(ctx, true, func(ctx context.Context, r pb.RaftMQClient) error {
		_, err := r.CommitOffset(ctx, req)
		return err
	})
}

// QueryOffset returns a group's committed offset; found is false if none.
func (c *Client) QueryOffset(ctx context.Context, group, topic string, queueID int32) (offset int64, found bool, err error) {
	err = c.read(ctx, func(ctx context.Context, r pb.RaftMQClient) error {
		resp, err := r.QueryOffset(ctx, &pb.QueryOffsetRequest{Group: group, Topic: topic, QueueId: queueID})
		offset, found = resp.GetOffset(), resp.GetFound()
		return err
	})
	return offset, found, err
}

// MinMaxOffset returns a queue's min and max (next) offsets.
func (c *Client) MinMaxOffset(ctx context.Context, topic string, queueID int32) (lo, hi int64, err error) {
	err = c.read(ctx, func(ctx context.Context, r pb.RaftMQClient) error {
		resp, err := r.QueueOffsets(ctx, &pb.QueueOffsetsRequest{Topic: topic, QueueId: queueID})
		lo, hi = resp.GetMinOffset(), resp.GetMaxOffset()
		return err
	})
	return lo, hi, err
}

// OffsetByTime finds the queue offset of the first (upper=false) or last
// (upper=true) message stored at ts.
func (c *Client) OffsetByTime(ctx context.Context, topic string, queueID int32, ts time.Time, upper bool) (int64, error) {
	b := pb.Boundary_BOUNDARY_LOWER
	if upper {
		b = pb.Boundary_BOUNDARY_UPPER
	}
	var off int64
	err := c.read(ctx, func(ctx context.Context, r pb.RaftMQClient) error {
		resp, err := r.OffsetByTime(ctx, &pb.OffsetByTimeRequest{Topic: topic, QueueId: queueID, Timestamp: ts.UnixMilli(), Boundary: b})
		off = resp.GetOffset()
		return err
	})
	return off, err
}

// QueryByKey finds up to max messages of topic with key in KEYS or UNIQ_KEY
// stored in [begin, end] (zero times: unbounded).
func (c *Client) QueryByKey(ctx context.Context, topic, key string, max int32, begin, end time.Time) ([]ReceivedMessage, error) {
	req := &pb.QueryByKeyRequest{Topic: topic, Key: key, MaxMessages: max}
	if !begin.IsZero() {
		req.BeginTimestamp = begin.UnixMilli()
	}
	if !end.IsZero() {
		req.EndTimestamp = end.UnixMilli()
	}
	return c.queryMessages(ctx, func(ctx context.Context, r pb.RaftMQClient) (*pb.QueryMessagesResponse, error) {
		return r.QueryByKey(ctx, req)
	})
}

// QueryByMsgID finds messages by UNIQ_KEY or offset msg id; topic "" looks
// in every topic.
func (c *Client) QueryByMsgID(ctx context.Context, topic, id string) ([]ReceivedMessage, error) {
	return c.queryMessages(ctx, func(ctx context.Context, r pb.RaftMQClient) (*pb.QueryMessagesResponse, error) {
		return r.QueryByMsgID(ctx, &pb.QueryByMsgIDRequest{Topic: topic, MsgId: id})
	})
}

// QueryByOffset reads the message at a physical commitlog offset.
func (c *Client) QueryByOffset(ctx context.Context, phy int64) (ReceivedMessage, error) {
	ms, err := c.queryMessages(ctx, func(ctx context.Context, r pb.RaftMQClient) (*pb.QueryMessagesResponse, error) {
		return r.QueryByOffset(ctx, &pb.QueryByOffsetRequest{PhysicalOffset: phy})
	})
	if err != nil {
		return ReceivedMessage{}, err
	}
	if len(ms) == 0 {
		return ReceivedMessage{}, fmt.Errorf("%w: no message at offset %d", ErrNotFound, phy)
	}
	return ms[0], nil
}

func (c *Client) queryMessages(ctx context.Context, call func(context.Context, pb.RaftMQClient) (*pb.QueryMessagesResponse, error)) ([]ReceivedMessage, error) {
	var resp *pb.QueryMessagesResponse
	err := c.read(ctx, func(ctx context.Context, r pb.RaftMQClient) (err error) {
		resp, err = call(ctx, r)
		return err
	})
	if err != nil {
		return nil, err
	}
	return fromStoredList(resp.GetMessages()), nil
}

// TopicInfo describes a topic.
type TopicInfo struct {
	Name    string
	Queues  int32
	Perm    int32
	Offsets []QueueOffsets // DescribeTopic only
}

// QueueOffsets are one queue's min and max offsets.
type QueueOffsets struct {
	QueueID  int32
	Min, Max int64
}

// CreateTopic creates a topic with queues queues (0: server default).
func (c *Client) CreateTopic(ctx context.Context, name string, queues int32) error {
	return c.write(ctx, false, func(ctx context.Context, r pb.RaftMQClient) error {
		_, err := r.CreateTopic(ctx, &pb.CreateTopicRequest{Name: name, Queues: queues})
		return err
	})
}

// UpdateTopic grows a topic to queues queues and/or sets its perm; 0 keeps
// the current value. Shrinking is refused (codes.InvalidArgument). Applying
// the same update twice changes nothing, so it is retried like a read.
func (c *Client) UpdateTopic(ctx context.Context, name string, queues, perm int32) error {
	return c.write(ctx, true, func(ctx context.Context, r pb.RaftMQClient) error {
		_, err := r.UpdateTopic(ctx, &pb.UpdateTopicRequest{Name: name, Queues: queues, Perm: perm})
		return err
	})
}

// DescribeTopic returns a topic's configuration and queue offsets.
func (c *Client) DescribeTopic(ctx context.Context, name string) (TopicInfo, error) {
	var resp *pb.TopicInfo
	err := c.read(ctx, func(ctx context.Context, r pb.RaftMQClient) (err error) {
		resp, err = r.DescribeTopic(ctx, &pb.DescribeTopicRequest{Name: name})
		return err
	})
	if err != nil {
		return TopicInfo{}, err
	}
	return topicInfo(resp), nil
}

func topicInfo(t *pb.TopicInfo) TopicInfo {
	out := TopicInfo{Name: t.GetName(), Queues: t.GetQueues(), Perm: t.GetPerm()}
	for _, q := range t.GetQueueOffsets() {
		out.Offsets = append(out.Offsets, QueueOffsets{QueueID: q.GetQueueId(), Min: q.GetMinOffset(), Max: q.GetMaxOffset()})
	}
	return out
}

// ListTopics lists every topic by name.
func (c *Client) ListTopics(ctx context.Context) ([]TopicInfo, error) {
	var resp *pb.ListTopicsResponse
	err := c.read(ctx, func(ctx context.Context, r pb.RaftMQClient) (err error) {
		resp, err = r.ListTopics(ctx, &pb.ListTopicsRequest{})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]TopicInfo, 0, len(resp.GetTopics()))
	for _, t := range resp.GetTopics() {
		out = append(out, topicInfo(t))
	}
	return out, nil
}

// DeleteTopic deletes a topic.
func (c *Client) DeleteTopic(ctx context.Context, name string) error {
	return c.write(ctx, false, func(ctx context.Context, r pb.RaftMQClient) error {
		_, err := r.DeleteTopic(ctx, &pb.DeleteTopicRequest{Name: name})
		return err
	})
}

// ClusterStatus is a node's view of the cluster.
type ClusterStatus = wire.ClusterStatus

// Status asks the leader for its status or, when no reachable node knows a
// leader, answers at once with the first reachable node's view (no leader)
// instead of waiting for one.
// A known leader that does not answer is forgotten and the leader looked
// up again, within Options.RetryTimeout.
func (c *Client) Status(ctx context.Context) (ClusterStatus, error) {
	var last error
	r := c.newRetry()
	for attempt := 0; ; attempt++ {
		if err := r.before(ctx, attempt, last); err != nil {
			return ClusterStatus{}, err
		}
		addr := c.leader()
		if addr == "" {
			var err error
			var nl *noLeaderError
			if addr, err = c.resolve(ctx); errors.As(err, &nl) && nl.first != nil {
				return fromStatus(nl.first), nil
			} else if err != nil {
				last = err
				continue
			}
		}
		st, err := c.probe(ctx, addr)
		if err == nil {
			return fromStatus(st), nil
		}
		last = err
		if ctx.Err() != nil || !transient(err) {
			return ClusterStatus{}, classify(err, false)
		}
		c.forgetLeader(addr)
	}
}

// StatusOf asks one node (by API address) for its status.
func (c *Client) StatusOf(ctx context.Context, addr string) (ClusterStatus, error) {
	resp, err := c.probe(ctx, addr)
	if err != nil {
		return ClusterStatus{}, classify(err, false)
	}
	return fromStatus(resp), nil
}

func fromStatus(s *pb.StatusResponse) ClusterStatus {
	out := ClusterStatus{ID: s.GetId(), State: s.GetState(), LeaderID: s.GetLeaderId(),
		LeaderRaftAddr: s.GetLeaderRaftAddr(), LeaderAPIAddr: s.GetLeaderApiAddr(), Term: s.GetTerm(),
		CommitIndex: s.GetCommitIndex(), AppliedIndex: s.GetAppliedIndex(), ConfirmOffset: s.GetConfirmOffset(),
		MinOffset: s.GetMinOffset(), MaxOffset: s.GetMaxOffset(), DiskUsedPercent: int(s.GetDiskUsedPercent()),
		RemotingAddr: s.GetRemotingAddr()}
	for _, m := range s.GetMembers() {
		out.Members = append(out.Members, wire.Member{ID: m.GetId(), RaftAddr: m.GetRaftAddr(), APIAddr: m.GetApiAddr(), Suffrage: m.GetSuffrage()})
	}
	return out
}

// Join adds a node to the cluster.
func (c *Client) Join(ctx context.Context, id, raftAddr, apiAddr string) error {
	return c.write(ctx, false, func(ctx context.Context, r pb.RaftMQClient) error {
		_, err := r.Join(ctx, &pb.JoinRequest{Id: id, RaftAddr: raftAddr, ApiAddr: apiAddr})
		return err
	})
}

// Remove removes a node from the cluster.
func (c *Client) Remove(ctx context.Context, id string) error {
	return c.write(ctx, false, func(ctx context.Context, r pb.RaftMQClient) error {
		_, err := r.Remove(ctx, &pb.RemoveRequest{Id: id})
		return err
	})
}

// Transfer moves leadership to id ("" = any voter).
func (c *Client) Transfer(ctx context.Context, id string) error {
	err := c.write(ctx, false, func(ctx context.Context, r pb.RaftMQClient) error {
		_, err := r.Transfer(ctx, &pb.TransferRequest{Id: id})
		return err
	})
	if err == nil {
		c.setLeader("")
	}
	return err
}
