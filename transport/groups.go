package transport

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
	"github.com/raftmq/raftmq/store"
)

// ListGroups lists the consumer groups with committed offsets, the topics
// they have them in and their total lag (a leader read).
func (s *Server) ListGroups(ctx context.Context, req *pb.ListGroupsRequest) (*pb.ListGroupsResponse, error) {
	if resp, fwd, err := leaderRead(s, ctx, func(ctx context.Context, c pb.RaftMQClient) (*pb.ListGroupsResponse, error) {
		return c.ListGroups(ctx, req)
	}); fwd {
		return resp, err
	}
	out := &pb.ListGroupsResponse{}
	var cur *pb.GroupSummary
	for _, g := range s.b.Reader().GroupProgress("", "") {
		if cur == nil || cur.Group != g.Group {
			cur = &pb.GroupSummary{Group: g.Group}
			out.Groups = append(out.Groups, cur)
		}
		if n := len(cur.Topics); n == 0 || cur.Topics[n-1] != g.Topic {
			cur.Topics = append(cur.Topics, g.Topic)
		}
		cur.Lag += g.Lag
	}
	return out, nil
}

// DescribeGroup returns a group's committed offset, the queue's offsets and
// the lag for every queue of its topics, or of one topic (a leader read).
func (s *Server) DescribeGroup(ctx context.Context, req *pb.DescribeGroupRequest) (*pb.DescribeGroupResponse, error) {
	if err := validName("group", req.GetGroup(), MaxGroupLen); err != nil {
		return nil, err
	}
	if req.GetTopic() != "" {
		if err := ValidTopic(req.GetTopic()); err != nil {
			return nil, err
		}
	}
	if resp, fwd, err := leaderRead(s, ctx, func(ctx context.Context, c pb.RaftMQClient) (*pb.DescribeGroupResponse, error) {
		return c.DescribeGroup(ctx, req)
	}); fwd {
		return resp, err
	}
	st := s.b.Reader()
	if t := req.GetTopic(); t != "" {
		if _, ok := st.Topic(t); !ok {
			return nil, status.Errorf(codes.NotFound, "topic %q does not exist", t)
		}
	}
	qs := st.GroupProgress(req.GetGroup(), req.GetTopic())
	if len(qs) == 0 {
		return nil, status.Errorf(codes.NotFound, "group %q has no committed offsets", req.GetGroup())
	}
	out := &pb.DescribeGroupResponse{Group: req.GetGroup(), Queues: make([]*pb.GroupQueueProgress, len(qs))}
	for i, q := range qs {
		out.Queues[i] = fromGroupQueue(q)
	}
	return out, nil
}

func fromGroupQueue(q store.GroupQueue) *pb.GroupQueueProgress {
	p := &pb.GroupQueueProgress{Topic: q.Topic, QueueId: q.QueueID, MinOffset: q.Min, MaxOffset: q.Max, Lag: q.Lag}
	if q.Committed != store.NoCommit {
		p.Committed, p.CommittedOffset = true, q.Committed
	}
	return p
}

// GroupCoordinator is implemented by backends that track the live members
// of consumer groups (the node, on its leader). JoinGroup records a
// heartbeat of clientID (or its leaving) and returns the live members,
// sorted, and how long a silent member stays; a member that is not the
// leader returns an error wrapping ErrNotLeader. An empty clientID only
// lists the members.
type GroupCoordinator interface {
	JoinGroup(ctx context.Context, group, clientID string, leave bool) (members []string, expiry time.Duration, err error)
}

// MaxClientIDLen bounds a consumer's client id.
const MaxClientIDLen = 255

// JoinGroup is a consumer's heartbeat, answered by the leader with the
// group's live members; without a client id it only lists them.
func (s *Server) JoinGroup(ctx context.Context, req *pb.JoinGroupRequest) (*pb.JoinGroupResponse, error) {
	if err := validName("group", req.GetGroup(), MaxGroupLen); err != nil {
		return nil, err
	}
	if len(req.GetClientId()) > MaxClientIDLen || (req.GetLeave() && req.GetClientId() == "") {
		return nil, invalid("client id of %d bytes: 1 to %d, or empty (list the members) when not leaving", len(req.GetClientId()), MaxClientIDLen)
	}
	gc, ok := s.b.(GroupCoordinator)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "this node does not track consumer-group members")
	}
	members, expiry, err := gc.JoinGroup(ctx, req.GetGroup(), req.GetClientId(), req.GetLeave())
	if err != nil {
		return forward(s, ctx, err, func(ctx context.Context, c pb.RaftMQClient) (*pb.JoinGroupResponse, error) {
			return c.JoinGroup(ctx, req)
		})
	}
	return &pb.JoinGroupResponse{Members: members, ExpiryMs: expiry.Milliseconds()}, nil
}
