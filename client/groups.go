package client

import (
	"context"
	"fmt"
	"time"

	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
)

// GroupSummary is one consumer group: the topics it has committed offsets
// in (sorted) and its lag summed over every queue of those topics.
type GroupSummary struct {
	Group  string
	Topics []string
	Lag    int64
}

// GroupQueue is a consumer group's progress in one queue.
type GroupQueue struct {
	Topic     string
	QueueID   int32
	Committed int64 // NoCommit if the group has no offset for the queue
	Min, Max  int64 // the queue's min offset and max (next) offset
	// Lag is Max - Committed, floored at 0; without a committed offset it
	// is Max - Min (what a consumer starting at the min offset reads).
	Lag int64
}

// NoCommit is GroupQueue.Committed (and GroupReset.From) of a queue the
// group has no committed offset for.
const NoCommit = -1

// ListGroups lists the consumer groups that have committed offsets, by
// name. It is a leader read, like QueryOffset.
func (c *Client) ListGroups(ctx context.Context) ([]GroupSummary, error) {
	var resp *pb.ListGroupsResponse
	err := c.read(ctx, func(ctx context.Context, r pb.RaftMQClient) (err error) {
		resp, err = r.ListGroups(ctx, &pb.ListGroupsRequest{})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]GroupSummary, 0, len(resp.GetGroups()))
	for _, g := range resp.GetGroups() {
		out = append(out, GroupSummary{Group: g.GetGroup(), Topics: g.GetTopics(), Lag: g.GetLag()})
	}
	return out, nil
}

// DescribeGroup returns group's progress in every queue of topic, or with
// topic "" of every topic it has committed offsets in (ErrNotFound if it
// has none), sorted by topic and queue. It is a leader read.
func (c *Client) DescribeGroup(ctx context.Context, group, topic string) ([]GroupQueue, error) {
	var resp *pb.DescribeGroupResponse
	err := c.read(ctx, func(ctx context.Context, r pb.RaftMQClient) (err error) {
		resp, err = r.DescribeGroup(ctx, &pb.DescribeGroupRequest{Group: group, Topic: topic})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]GroupQueue, 0, len(resp.GetQueues()))
	for _, q := range resp.GetQueues() {
		g := GroupQueue{Topic: q.GetTopic(), QueueID: q.GetQueueId(), Committed: NoCommit,
			Min: q.GetMinOffset(), Max: q.GetMaxOffset(), Lag: q.GetLag()}
		if q.GetCommitted() {
			g.Committed = q.GetCommittedOffset()
		}
		out = append(out, g)
	}
	return out, nil
}

// ResetTo says where ResetGroup moves a group's offsets.
type ResetTo int

// Reset targets.
const (
	ResetToEarliest ResetTo = iota + 1 // each queue's min offset
	ResetToLatest                      // each queue's max offset: skip everything stored
	ResetToOffset                      // ResetTarget.Offset, clamped to [min, max]
	ResetToTime                        // the first message stored at or after ResetTarget.Time
)

// ResetTarget is where to reset to; Offset and Time go with their kind.
type ResetTarget struct {
	To     ResetTo
	Offset int64
	Time   time.Time
}

// GroupReset is what ResetGroup did to one queue.
type GroupReset struct {
	QueueID int32
	From    int64 // the committed offset before, or NoCommit
	To      int64
}

// ResetGroup moves group's committed offset in every queue of topic to
// target, in one commit through Raft (so every replica agrees), also
// backwards. Consumers of the group that are running keep committing their
// own positions and overwrite the reset: stop them first.
func (c *Client) ResetGroup(ctx context.Context, group, topic string, target ResetTarget) ([]GroupReset, error) {
	if err := target.check(); err != nil {
		return nil, err
	}
	t, err := c.DescribeTopic(ctx, topic)
	if err != nil {
		return nil, err
	}
	before, err := c.DescribeGroup(ctx, group, topic)
	if err != nil {
		return nil, err
	}
	from := map[int32]int64{}
	for _, q := range before {
		from[q.QueueID] = q.Committed
	}
	out := make([]GroupReset, 0, len(t.Offsets))
	req := &pb.CommitOffsetRequest{}
	for _, q := range t.Offsets {
		to, err := c.resetOffset(ctx, topic, q, target)
		if err != nil {
			return nil, fmt.Errorf("queue %d: %w", q.QueueID, err)
		}
		f, ok := from[q.QueueID]
		if !ok {
			f = NoCommit
		}
		out = append(out, GroupReset{QueueID: q.QueueID, From: f, To: to})
		req.Commits = append(req.Commits, &pb.OffsetCommit{Group: group, Topic: topic, QueueId: q.QueueID, Offset: to})
	}
	if len(req.Commits) == 0 {
		return out, nil
	}
	err = c.write(ctx, true, func(ctx context.Context, r pb.RaftMQClient) error {
		_, err := r.CommitOffset(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (t ResetTarget) check() error {
	switch t.To {
	case ResetToEarliest, ResetToLatest:
	case ResetToOffset:
		if t.Offset < 0 {
			return fmt.Errorf("%w: reset to offset %d", ErrInvalid, t.Offset)
		}
	case ResetToTime:
		if t.Time.IsZero() || t.Time.UnixMilli() < 0 {
			return fmt.Errorf("%w: reset to time %v", ErrInvalid, t.Time)
		}
	default:
		return fmt.Errorf("%w: reset target %d", ErrInvalid, t.To)
	}
	return nil
}

// resetOffset is target's offset in queue q.
func (c *Client) resetOffset(ctx context.Context, topic string, q QueueOffsets, target ResetTarget) (int64, error) {
	switch target.To {
	case ResetToEarliest:
		return q.Min, nil
	case ResetToLatest:
		return q.Max, nil
	case ResetToOffset:
		return min(max(target.Offset, q.Min), q.Max), nil
	default:
		return c.OffsetAtOrAfter(ctx, topic, q.QueueID, target.Time)
	}
}

// OffsetAtOrAfter returns the queue offset of the first message stored at
// or after t (RocketMQ's searchOffset), or the queue's max offset if every
// message is older. Store timestamps are whole milliseconds, so a t inside
// a millisecond counts from the next one.
func (c *Client) OffsetAtOrAfter(ctx context.Context, topic string, queueID int32, t time.Time) (int64, error) {
	return c.OffsetByTime(ctx, topic, queueID, ceilMilli(t), false)
}

// ceilMilli rounds t up to a whole millisecond.
func ceilMilli(t time.Time) time.Time {
	ms := time.UnixMilli(t.UnixMilli())
	if ms.Before(t) {
		ms = ms.Add(time.Millisecond)
	}
	return ms
}
