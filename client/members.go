package client

import (
	"context"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
)

// JoinGroup is a consumer's heartbeat: clientID is a live member of group
// until it leaves or stops beating for expiry. It returns the group's live
// members, sorted, which every member divides a topic's queues among with
// AllocateAveragely. The leader keeps the members (in memory: after a
// leader change they rejoin at their next beat); it is retried like
// CommitOffset.
func (c *Client) JoinGroup(ctx context.Context, group, clientID string) (members []string, expiry time.Duration, err error) {
	err = c.write(ctx, true, func(ctx context.Context, r pb.RaftMQClient) error {
		resp, err := r.JoinGroup(ctx, &pb.JoinGroupRequest{Group: group, ClientId: clientID})
		members, expiry = resp.GetMembers(), time.Duration(resp.GetExpiryMs())*time.Millisecond
		return err
	})
	return members, expiry, err
}

// LeaveGroup removes clientID from group at once, so the others take its
// queues at their next heartbeat rather than after the expiry.
func (c *Client) LeaveGroup(ctx context.Context, group, clientID string) error {
	return c.write(ctx, true, func(ctx context.Context, r pb.RaftMQClient) error {
		_, err := r.JoinGroup(ctx, &pb.JoinGroupRequest{Group: group, ClientId: clientID, Leave: true})
		return err
	})
}

// GroupMembers lists a group's live members, sorted, without joining it;
// tracked is false when the cluster does not track members (an older
// server).
func (c *Client) GroupMembers(ctx context.Context, group string) (members []string, tracked bool, err error) {
	err = c.read(ctx, func(ctx context.Context, r pb.RaftMQClient) error {
		resp, err := r.JoinGroup(ctx, &pb.JoinGroupRequest{Group: group})
		members = resp.GetMembers()
		return err
	})
	if status.Code(err) == codes.Unimplemented {
		return nil, false, nil
	}
	return members, err == nil, err
}

// AllocateAveragely is RocketMQ's default allocation
// (AllocateMessageQueueAveragely): with the queues and the members both
// sorted, member i of n takes a contiguous run of len(queues)/n queues,
// the first len(queues)%n members one more. A member not in members gets
// none; so does every member past the queue count.
func AllocateAveragely(queues []int32, members []string, me string) []int32 {
	queues, members = slices.Clone(queues), slices.Clone(members)
	slices.Sort(queues)
	slices.Sort(members)
	index := slices.Index(members, me)
	if index < 0 || len(queues) == 0 {
		return nil
	}
	n, q := len(members), len(queues)
	mod := q % n
	size := q / n
	if mod > 0 && index < mod {
		size++
	}
	if q <= n {
		size = 1
	}
	start := index*size + mod
	if mod > 0 && index < mod {
		start = index * size
	}
	var mine []int32
	for i := 0; i < size && start+i < q; i++ {
		mine = append(mine, queues[(start+i)%q])
	}
	return mine
}
