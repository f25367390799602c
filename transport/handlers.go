package transport

import (
	"context"
	"errors"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/message"
	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
	"github.com/raftmq/raftmq/store"
)

const (
	defaultQueues = 8
	permReadWrite = 6
)

// Send appends a batch through Raft (forwarded to the leader if needed).
func (s *Server) Send(ctx context.Context, req *pb.SendRequest) (*pb.SendResponse, error) {
	if err := validateSend(req, s.opts.MaxMessageSize); err != nil {
		return nil, err
	}
	s.fillDefaults(ctx, req)
	msgs := toLogMessages(req.GetMessages())
	res, err := s.b.Send(ctx, msgs)
	if err != nil {
		return forward(s, ctx, err, func(ctx context.Context, c pb.RaftMQClient) (*pb.SendResponse, error) {
			return c.Send(ctx, req)
		})
	}
	return &pb.SendResponse{Results: fromPutResults(res)}, nil
}

// fillDefaults fixes what the receiving node decides (queue, born time and
// host) in the request itself, so a forwarded request carries the same.
func (s *Server) fillDefaults(ctx context.Context, req *pb.SendRequest) {
	now := s.opts.Now().UnixMilli()
	born := ""
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		if _, err := message.ParseHostPort(p.Addr.String()); err == nil {
			born = p.Addr.String()
		}
	}
	for _, m := range req.GetMessages() {
		if m.GetBornTimestamp() == 0 {
			m.BornTimestamp = now
		}
		if m.GetBornHost() == "" {
			m.BornHost = born
		}
		if m.GetQueueId() == -1 {
			m.QueueId = s.pickQueue(m.GetTopic())
		}
	}
}

// pickQueue chooses a queue round-robin among the topic's queues (0 if the
// topic is not known locally: auto-creation makes it).
func (s *Server) pickQueue(topic string) int32 {
	n := s.rr.Add(1)
	st := s.b.Reader()
	if st == nil {
		return 0
	}
	t, ok := st.Topic(topic)
	if !ok || t.Queues <= 0 {
		return 0
	}
	return int32(n % uint32(t.Queues))
}

// Pull reads a queue from the local store, long-polling up to max_wait_ms
// when the offset is the queue's next one.
func (s *Server) Pull(ctx context.Context, req *pb.PullRequest) (*pb.PullResponse, error) {
	if err := validatePull(req); err != nil {
		return nil, err
	}
	maxN, maxB := int(req.GetMaxMessages()), int(req.GetMaxBytes())
	if maxN == 0 {
		maxN = DefaultPullMessages
	}
	if maxB == 0 {
		maxB = DefaultPullBytes
	}
	tag := req.GetTag()
	if tag == "*" {
		tag = ""
	}
	st := s.b.Reader()
	get := func() (store.GetResult, error) {
		return st.GetMessages(req.GetTopic(), req.GetQueueId(), req.GetOffset(), maxN, maxB, tag)
	}
	var records []byte
	nrec := 0
	if req.GetRecords() {
		// Records are copied once, from the mapping into the answer's
		// buffer, which returns to recordBufs once pullCodec has handed it
		// to gRPC and the answer is written.
		records = (*recordBufs.Get(min(maxB, maxPooledRecords)))[:0]
		get = func() (store.GetResult, error) {
			records, nrec = records[:0], 0
			return st.ReadMessages(req.GetTopic(), req.GetQueueId(), req.GetOffset(), maxN, maxB, tag,
				func(r *message.Record) error {
					records = message.AppendRecord(records, r)
					nrec++
					return nil
				})
		}
	}
	res, err := get()
	if err == nil && res.Status == store.OffsetOverflowOne && req.GetMaxWaitMs() > 0 {
		res, err = s.longPoll(ctx, req, get)
	}
	if err != nil {
		return nil, toStatus(err)
	}
	out := &pb.PullResponse{
		Status:     pullStatus(res.Status),
		NextOffset: res.NextOffset,
		MinOffset:  res.MinOffset,
		MaxOffset:  res.MaxOffset,
	}
	if len(records) > 0 {
		out.Records = records
	} else if len(res.Messages) > 0 {
		out.Messages = fromStoreMessages(res.Messages)
	}
	s.pulled.add(req.GetTopic(), nrec+len(res.Messages))
	return out, nil
}

func (s *Server) longPoll(ctx context.Context, req *pb.PullRequest, get func() (store.GetResult, error)) (store.GetResult, error) {
	wctx, cancel := context.WithTimeout(ctx, time.Duration(req.GetMaxWaitMs())*time.Millisecond)
	werr := s.b.Reader().WaitMessage(wctx, req.GetTopic(), req.GetQueueId(), req.GetOffset())
	cancel()
	if err := ctx.Err(); err != nil {
		return store.GetResult{}, err
	}
	if werr != nil && !errors.Is(werr, context.DeadlineExceeded) {
		return store.GetResult{}, werr
	}
	return get()
}

// QueryByKey looks messages up in the hash index.
func (s *Server) QueryByKey(ctx context.Context, req *pb.QueryByKeyRequest) (*pb.QueryMessagesResponse, error) {
	if err := validateQueryByKey(req); err != nil {
		return nil, err
	}
	maxN := int(req.GetMaxMessages())
	if maxN == 0 {
		maxN = DefaultQueryMax
	}
	end := req.GetEndTimestamp()
	if end == 0 {
		end = s.opts.Now().UnixMilli()
	}
	ms, err := s.b.Reader().QueryByKey(req.GetTopic(), req.GetKey(), maxN, req.GetBeginTimestamp(), end)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, toStatus(err)
	}
	return &pb.QueryMessagesResponse{Messages: fromStoreMessages(boundBytes(ms, MaxQueryBytes))}, nil
}

// boundBytes keeps the messages of ms, in order, whose bodies and
// properties fit maxBytes, and at least the first.
func boundBytes(ms []store.Message, maxBytes int) []store.Message {
	n := 0
	for i := range ms {
		n += len(ms[i].Body) + len(ms[i].Properties)
		if i > 0 && n > maxBytes {
			return ms[:i]
		}
	}
	return ms
}

// QueryByMsgID finds messages by UNIQ_KEY or by offset msg id, in one topic
// or in all of them.
func (s *Server) QueryByMsgID(ctx context.Context, req *pb.QueryByMsgIDRequest) (*pb.QueryMessagesResponse, error) {
	if req.GetTopic() != "" {
		if err := ValidTopic(req.GetTopic()); err != nil {
			return nil, err
		}
	}
	if err := validName("msg id", req.GetMsgId(), MaxKeyLen); err != nil {
		return nil, err
	}
	st := s.b.Reader()
	seen := map[int64]bool{}
	var out []*pb.StoredMessage
	add := func(ms []store.Message) {
		for _, m := range ms {
			if !seen[m.PhysicalOffset] {
				seen[m.PhysicalOffset] = true
				out = append(out, FromStoreMessage(m))
			}
		}
	}
	if _, phy, err := message.ParseOffsetMsgID(req.GetMsgId()); err == nil {
		m, resp, fwd, err := lookupApplied(s, ctx, phy, func(ctx context.Context, c pb.RaftMQClient) (*pb.QueryMessagesResponse, error) {
			return c.QueryByMsgID(ctx, req)
		})
		if fwd {
			return resp, err
		}
		if err == nil && strings.EqualFold(FromStoreMessage(m).GetOffsetMsgId(), req.GetMsgId()) &&
			(req.GetTopic() == "" || m.Topic == req.GetTopic()) {
			add([]store.Message{m})
		}
	}
	topics := []string{req.GetTopic()}
	if req.GetTopic() == "" {
		topics = topics[:0]
		for _, t := range st.Topics() {
			topics = append(topics, t.Name)
		}
	}
	for _, t := range topics {
		ms, err := st.LookupByMsgID(t, req.GetMsgId())
		if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrNoSuchTopic) {
			return nil, toStatus(err)
		}
		add(ms)
	}
	if len(out) == 0 {
		return nil, status.Errorf(codes.NotFound, "no message with id %q", req.GetMsgId())
	}
	return &pb.QueryMessagesResponse{Messages: out}, nil
}

// QueryByOffset reads the message at a physical commitlog offset.
func (s *Server) QueryByOffset(ctx context.Context, req *pb.QueryByOffsetRequest) (*pb.QueryMessagesResponse, error) {
	if err := validOffset("physical offset", req.GetPhysicalOffset()); err != nil {
		return nil, err
	}
	m, resp, fwd, err := lookupApplied(s, ctx, req.GetPhysicalOffset(), func(ctx context.Context, c pb.RaftMQClient) (*pb.QueryMessagesResponse, error) {
		return c.QueryByOffset(ctx, req)
	})
	if fwd {
		return resp, err
	}
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.QueryMessagesResponse{Messages: []*pb.StoredMessage{FromStoreMessage(m)}}, nil
}

// CommitOffset stores consumer-group offsets through Raft.
func (s *Server) CommitOffset(ctx context.Context, req *pb.CommitOffsetRequest) (*pb.CommitOffsetResponse, error) {
	if err := validateCommits(req); err != nil {
		return nil, err
	}
	cs := make([]store.OffsetCommit, len(req.GetCommits()))
	for i, c := range req.GetCommits() {
		cs[i] = store.OffsetCommit{Group: c.GetGroup(), Topic: c.GetTopic(), QueueID: c.GetQueueId(), Offset: c.GetOffset()}
	}
	if err := s.b.CommitOffsets(ctx, cs); err != nil {
		return forward(s, ctx, err, func(ctx context.Context, c pb.RaftMQClient) (*pb.CommitOffsetResponse, error) {
			return c.CommitOffset(ctx, req)
		})
	}
	return &pb.CommitOffsetResponse{}, nil
}

// QueryOffset reads a consumer group's committed offset.
func (s *Server) QueryOffset(ctx context.Context, req *pb.QueryOffsetRequest) (*pb.QueryOffsetResponse, error) {
	if err := validGroupQueue(req.GetGroup(), req.GetTopic(), req.GetQueueId()); err != nil {
		return nil, err
	}
	// A committed offset must never read back older than an acknowledged
	// commit, even right after a failover: only the verified leader answers.
	if lr, ok := s.b.(LeaderReader); ok {
		if err := lr.VerifyLeaderRead(ctx); err != nil {
			return forward(s, ctx, err, func(ctx context.Context, c pb.RaftMQClient) (*pb.QueryOffsetResponse, error) {
				return c.QueryOffset(ctx, req)
			})
		}
	}
	off, ok := s.b.Reader().ConsumerOffset(req.GetGroup(), req.GetTopic(), req.GetQueueId())
	return &pb.QueryOffsetResponse{Offset: off, Found: ok}, nil
}

// QueueOffsets returns a queue's min and max offsets.
func (s *Server) QueueOffsets(ctx context.Context, req *pb.QueueOffsetsRequest) (*pb.QueueOffsetsResponse, error) {
	if err := validTopicQueue(req.GetTopic(), req.GetQueueId()); err != nil {
		return nil, err
	}
	st := s.b.Reader()
	lo, err := st.MinOffset(req.GetTopic(), req.GetQueueId())
	if err != nil {
		return nil, toStatus(err)
	}
	hi, err := st.MaxOffset(req.GetTopic(), req.GetQueueId())
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.QueueOffsetsResponse{MinOffset: lo, MaxOffset: hi}, nil
}

// OffsetByTime finds a queue offset by store timestamp.
func (s *Server) OffsetByTime(ctx context.Context, req *pb.OffsetByTimeRequest) (*pb.OffsetByTimeResponse, error) {
	if err := validTopicQueue(req.GetTopic(), req.GetQueueId()); err != nil {
		return nil, err
	}
	if err := validOffset("timestamp", req.GetTimestamp()); err != nil {
		return nil, err
	}
	b := req.GetBoundary()
	if b != pb.Boundary_BOUNDARY_LOWER && b != pb.Boundary_BOUNDARY_UPPER {
		return nil, invalid("boundary %d is neither LOWER nor UPPER", b)
	}
	off, err := s.b.Reader().OffsetByTime(req.GetTopic(), req.GetQueueId(), req.GetTimestamp(), b == pb.Boundary_BOUNDARY_UPPER)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.OffsetByTimeResponse{Offset: off}, nil
}

// CreateTopic creates a topic through Raft.
func (s *Server) CreateTopic(ctx context.Context, req *pb.CreateTopicRequest) (*pb.CreateTopicResponse, error) {
	if err := validateCreateTopic(req); err != nil {
		return nil, err
	}
	t := store.TopicConfig{Name: req.GetName(), Queues: req.GetQueues(), Perm: req.GetPerm()}
	if t.Queues == 0 {
		t.Queues = defaultQueues
	}
	if t.Perm == 0 {
		t.Perm = permReadWrite
	}
	if err := s.b.CreateTopic(ctx, t); err != nil {
		return forward(s, ctx, err, func(ctx context.Context, c pb.RaftMQClient) (*pb.CreateTopicResponse, error) {
			return c.CreateTopic(ctx, req)
		})
	}
	return &pb.CreateTopicResponse{}, nil
}

// TopicUpdater is implemented by backends that replicate topic updates
// (node.Node does). It is separate from Backend so that existing backends
// keep compiling; a backend without it answers UpdateTopic Unimplemented.
type TopicUpdater interface {
	// UpdateTopic grows a topic's queue count and/or changes its perm (0
	// keeps a value); store.ErrNoSuchTopic / store.ErrBadQueue when refused.
	UpdateTopic(ctx context.Context, t store.TopicConfig) error
}

// UpdateTopic updates a topic through Raft.
func (s *Server) UpdateTopic(ctx context.Context, req *pb.UpdateTopicRequest) (*pb.UpdateTopicResponse, error) {
	if err := ValidTopic(req.GetName()); err != nil {
		return nil, err
	}
	if q := req.GetQueues(); q < 0 || q > MaxQueues {
		return nil, invalid("queues %d out of range [1, %d] (0 = keep)", q, MaxQueues)
	}
	if p := req.GetPerm(); p < 0 || p > 7 {
		return nil, invalid("perm %d out of range [0, 7] (0 = keep)", p)
	}
	u, ok := s.b.(TopicUpdater)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "this server cannot update topics")
	}
	t := store.TopicConfig{Name: req.GetName(), Queues: req.GetQueues(), Perm: req.GetPerm()}
	if err := u.UpdateTopic(ctx, t); err != nil {
		return forward(s, ctx, err, func(ctx context.Context, c pb.RaftMQClient) (*pb.UpdateTopicResponse, error) {
			return c.UpdateTopic(ctx, req)
		})
	}
	return &pb.UpdateTopicResponse{}, nil
}

// DescribeTopic returns a topic's config and queue offsets.
func (s *Server) DescribeTopic(ctx context.Context, req *pb.DescribeTopicRequest) (*pb.TopicInfo, error) {
	if err := ValidTopic(req.GetName()); err != nil {
		return nil, err
	}
	st := s.b.Reader()
	t, ok := st.Topic(req.GetName())
	if !ok {
		return nil, status.Errorf(codes.NotFound, "topic %q does not exist", req.GetName())
	}
	info := &pb.TopicInfo{Name: t.Name, Queues: t.Queues, Perm: t.Perm}
	for q := int32(0); q < t.Queues; q++ {
		lo, err1 := st.MinOffset(t.Name, q)
		hi, err2 := st.MaxOffset(t.Name, q)
		if err := errors.Join(err1, err2); err != nil {
			return nil, toStatus(err)
		}
		info.QueueOffsets = append(info.QueueOffsets, &pb.QueueInfo{QueueId: q, MinOffset: lo, MaxOffset: hi})
	}
	return info, nil
}

// ListTopics lists topics by name.
func (s *Server) ListTopics(ctx context.Context, req *pb.ListTopicsRequest) (*pb.ListTopicsResponse, error) {
	ts := s.b.Reader().Topics()
	sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
	out := &pb.ListTopicsResponse{}
	for _, t := range ts {
		out.Topics = append(out.Topics, &pb.TopicInfo{Name: t.Name, Queues: t.Queues, Perm: t.Perm})
	}
	return out, nil
}

// DeleteTopic deletes a topic through Raft.
func (s *Server) DeleteTopic(ctx context.Context, req *pb.DeleteTopicRequest) (*pb.DeleteTopicResponse, error) {
	if err := ValidTopic(req.GetName()); err != nil {
		return nil, err
	}
	if err := s.b.DeleteTopic(ctx, req.GetName()); err != nil {
		return forward(s, ctx, err, func(ctx context.Context, c pb.RaftMQClient) (*pb.DeleteTopicResponse, error) {
			return c.DeleteTopic(ctx, req)
		})
	}
	return &pb.DeleteTopicResponse{}, nil
}

// Status returns this node's view of the cluster.
func (s *Server) Status(ctx context.Context, req *pb.StatusRequest) (*pb.StatusResponse, error) {
	return fromClusterStatus(s.b.Status()), nil
}

// Join adds a member (on the leader).
func (s *Server) Join(ctx context.Context, req *pb.JoinRequest) (*pb.JoinResponse, error) {
	if err := validateJoin(req); err != nil {
		return nil, err
	}
	if err := s.b.Join(ctx, req.GetId(), req.GetRaftAddr(), req.GetApiAddr()); err != nil {
		return forward(s, ctx, err, func(ctx context.Context, c pb.RaftMQClient) (*pb.JoinResponse, error) {
			return c.Join(ctx, req)
		})
	}
	return &pb.JoinResponse{}, nil
}

// Remove removes a member (on the leader).
func (s *Server) Remove(ctx context.Context, req *pb.RemoveRequest) (*pb.RemoveResponse, error) {
	if err := validName("id", req.GetId(), MaxIDLen); err != nil {
		return nil, err
	}
	if err := s.b.Remove(ctx, req.GetId()); err != nil {
		return forward(s, ctx, err, func(ctx context.Context, c pb.RaftMQClient) (*pb.RemoveResponse, error) {
			return c.Remove(ctx, req)
		})
	}
	return &pb.RemoveResponse{}, nil
}

// Transfer moves leadership to id ("" = any voter).
func (s *Server) Transfer(ctx context.Context, req *pb.TransferRequest) (*pb.TransferResponse, error) {
	if len(req.GetId()) > MaxIDLen {
		return nil, invalid("id is %d bytes; the limit is %d", len(req.GetId()), MaxIDLen)
	}
	if err := s.b.Transfer(ctx, req.GetId()); err != nil {
		return forward(s, ctx, err, func(ctx context.Context, c pb.RaftMQClient) (*pb.TransferResponse, error) {
			return c.Transfer(ctx, req)
		})
	}
	return &pb.TransferResponse{}, nil
}
