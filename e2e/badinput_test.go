package e2e_test

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/nodeproc"
	"github.com/raftmq/raftmq/message"
	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
	"github.com/raftmq/raftmq/transport"
	"github.com/raftmq/raftmq/transport/transporttest/badinput"
	"github.com/raftmq/raftmq/wire"
)

// limits are the live node's request limits (transport constants, the
// message layout's topic and properties limits and the default 4 MiB body
// limit of store.DefaultConfig).
func limits() badinput.Limits {
	return badinput.Limits{MaxTopicLen: message.MaxTopicLen, MaxPropertiesLen: message.MaxPropertiesLen,
		MaxProperties: transport.MaxProperties, MaxQueueID: transport.MaxQueueID, MaxQueues: transport.MaxQueues,
		MaxBatchMessages: transport.MaxBatchMessages, MaxBody: 4 << 20, MaxPullMessages: transport.MaxPullMessages,
		MaxPullBytes: wire.MaxPullBytes, MaxWaitMs: transport.MaxWaitMs, MaxKeyLen: transport.MaxKeyLen,
		MaxIDLen: transport.MaxIDLen}
}

// nodeState is what bad input must not change on a node. MaxOffset is
// compared apart: a write refused by the state machine is still a Raft
// entry, recorded as a 48-byte no-op frame (FORMAT.md §2.2).
type nodeState struct {
	LeaderID     string
	MinOffset    int64
	MaxOffset    int64 `json:"-"`
	Members      []nodeproc.Member
	Topics       []string            // name/queues/perm
	QueueOffsets map[string][2]int64 // topic/queue -> min, max
	GroupOffsets map[string]int64    // group/topic/queue -> committed
}

// noopFrame is the commitlog size of a Raft entry applied as a no-op.
const noopFrame = 48

// compareStates reports how after differs from before; growth of the
// commitlog by whole no-op frames is allowed when noops is set.
func compareStates(before, after []nodeState, noops bool) error {
	for i := range before {
		b, a := before[i], after[i]
		grown := a.MaxOffset - b.MaxOffset
		if grown != 0 && (!noops || grown < 0 || grown%noopFrame != 0) {
			return fmt.Errorf("node %d: commitlog max offset %d -> %d (no-op frames allowed: %v)", i, b.MaxOffset, a.MaxOffset, noops)
		}
		a.MaxOffset, b.MaxOffset = 0, 0
		if !reflect.DeepEqual(a, b) {
			return fmt.Errorf("node %d:\nbefore %+v\nafter  %+v", i, b, a)
		}
	}
	return nil
}

// clusterState reads every node's state from its own store.
func clusterState(t *testing.T, ctx context.Context, c *nodeproc.Cluster, conns []pb.RaftMQClient) []nodeState {
	t.Helper()
	out := make([]nodeState, len(c.Nodes))
	for i, p := range c.Nodes {
		st, err := p.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s := nodeState{LeaderID: st.LeaderID, MinOffset: st.MinOffset, MaxOffset: st.MaxOffset,
			Members: st.Members, QueueOffsets: map[string][2]int64{}, GroupOffsets: map[string]int64{}}
		slices.SortFunc(s.Members, func(a, b nodeproc.Member) int { return strings.Compare(a.ID, b.ID) })
		list, err := conns[i].ListTopics(ctx, &pb.ListTopicsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, tp := range list.GetTopics() {
			s.Topics = append(s.Topics, fmt.Sprintf("%s/%d/%d", tp.GetName(), tp.GetQueues(), tp.GetPerm()))
			for q := int32(0); q < tp.GetQueues(); q++ {
				o, err := conns[i].QueueOffsets(ctx, &pb.QueueOffsetsRequest{Topic: tp.GetName(), QueueId: q})
				if err != nil {
					t.Fatal(err)
				}
				s.QueueOffsets[fmt.Sprintf("%s/%d", tp.GetName(), q)] = [2]int64{o.GetMinOffset(), o.GetMaxOffset()}
				for _, g := range []string{"g", "g2"} {
					r, err := conns[i].QueryOffset(ctx, &pb.QueryOffsetRequest{Group: g, Topic: tp.GetName(), QueueId: q})
					if err != nil {
						t.Fatal(err)
					}
					if r.GetFound() {
						s.GroupOffsets[fmt.Sprintf("%s/%s/%d", g, tp.GetName(), q)] = r.GetOffset()
					}
				}
			}
		}
		out[i] = s
	}
	return out
}

// settled waits until every node has applied the leader's commit index.
func settled(t *testing.T, ctx context.Context, c *nodeproc.Cluster) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := pollUntil(wctx, func() error {
		lead, err := c.Leader(wctx)
		if err != nil {
			return err
		}
		ls, err := c.Nodes[lead].Status(wctx)
		if err != nil {
			return err
		}
		for _, p := range c.Nodes {
			st, err := p.Status(wctx)
			if err != nil {
				return err
			}
			if st.AppliedIndex < ls.CommitIndex || st.MaxOffset != ls.MaxOffset {
				return fmt.Errorf("node %s applied %d (max %d), leader committed %d (max %d)", st.ID, st.AppliedIndex, st.MaxOffset, ls.CommitIndex, ls.MaxOffset)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// rawCodec sends the request bytes as they are: malformed protobuf on the wire.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// liveCase is a bad request whose answer depends on the cluster's state.
// write marks requests that are proposed through Raft before the state
// machine refuses them (they may leave no-op frames).
type liveCase struct {
	name  string
	call  badinput.Call
	code  codes.Code
	write bool
}

// pullStatus turns a Pull that answers with the wrong status into an error.
func pullStatus(req *pb.PullRequest, want pb.PullStatus) badinput.Call {
	return func(ctx context.Context, c pb.RaftMQClient) error {
		r, err := c.Pull(ctx, req)
		if err != nil {
			return err
		}
		if r.GetStatus() != want || len(r.GetMessages()) != 0 {
			return status.Errorf(codes.Internal, "test: pull status %v with %d messages, want %v and none", r.GetStatus(), len(r.GetMessages()), want)
		}
		return nil
	}
}

// liveCases are bad requests that need a running cluster: unknown topics,
// queues, members and offsets, duplicate joins.
func liveCases(c *nodeproc.Cluster, topic string, maxPhy int64) []liveCase {
	n2 := c.Nodes[1].Spec()
	rpc := func(f func(context.Context, pb.RaftMQClient) error) badinput.Call { return f }
	return []liveCase{
		{"describe/unknown topic", rpc(func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.DescribeTopic(ctx, &pb.DescribeTopicRequest{Name: "no-such-topic"})
			return err
		}), codes.NotFound, false},
		{"delete/unknown topic", rpc(func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.DeleteTopic(ctx, &pb.DeleteTopicRequest{Name: "no-such-topic"})
			return err
		}), codes.NotFound, true},
		{"create/existing topic", rpc(func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.CreateTopic(ctx, &pb.CreateTopicRequest{Name: topic, Queues: 4})
			return err
		}), codes.AlreadyExists, true},
		{"send/unknown queue", rpc(func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.Send(ctx, &pb.SendRequest{Messages: []*pb.Message{{Topic: topic, QueueId: 7, Body: []byte("x")}}})
			return err
		}), codes.InvalidArgument, true},
		{"pull/unknown topic", pullStatus(&pb.PullRequest{Topic: "no-such-topic"}, pb.PullStatus_PULL_STATUS_NO_MATCHED_LOGIC_QUEUE), codes.OK, false},
		{"pull/unknown queue", pullStatus(&pb.PullRequest{Topic: topic, QueueId: 7}, pb.PullStatus_PULL_STATUS_NO_MATCHED_LOGIC_QUEUE), codes.OK, false},
		{"pull/huge offset", pullStatus(&pb.PullRequest{Topic: topic, Offset: 1 << 62}, pb.PullStatus_PULL_STATUS_OFFSET_OVERFLOW_BADLY), codes.OK, false},
		{"queueoffsets/unknown topic", rpc(func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.QueueOffsets(ctx, &pb.QueueOffsetsRequest{Topic: "no-such-topic"})
			return err
		}), codes.NotFound, false},
		{"queueoffsets/unknown queue", rpc(func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.QueueOffsets(ctx, &pb.QueueOffsetsRequest{Topic: topic, QueueId: 7})
			return err
		}), codes.InvalidArgument, false},
		{"bytime/unknown topic", rpc(func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.OffsetByTime(ctx, &pb.OffsetByTimeRequest{Topic: "no-such-topic", Timestamp: 1})
			return err
		}), codes.NotFound, false},
		{"queryoffset/huge", rpc(func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.QueryByOffset(ctx, &pb.QueryByOffsetRequest{PhysicalOffset: 1 << 62})
			return err
		}), codes.InvalidArgument, false},
		{"queryoffset/at max", rpc(func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.QueryByOffset(ctx, &pb.QueryByOffsetRequest{PhysicalOffset: maxPhy})
			return err
		}), codes.NotFound, false},
		{"queryoffset/inside a message", rpc(func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.QueryByOffset(ctx, &pb.QueryByOffsetRequest{PhysicalOffset: 1})
			return err
		}), codes.NotFound, false},
		{"querymsgid/unknown", rpc(func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.QueryByMsgID(ctx, &pb.QueryByMsgIDRequest{MsgId: "no-such-id"})
			return err
		}), codes.NotFound, false},
		{"commit/unknown topic", rpc(func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.CommitOffset(ctx, &pb.CommitOffsetRequest{Commits: []*pb.OffsetCommit{{Group: "g2", Topic: "no-such-topic", Offset: 1}}})
			return err
		}), codes.NotFound, true},
		{"commit/unknown queue", rpc(func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.CommitOffset(ctx, &pb.CommitOffsetRequest{Commits: []*pb.OffsetCommit{{Group: "g2", Topic: topic, QueueId: 7, Offset: 1}}})
			return err
		}), codes.InvalidArgument, true},
		{"join/duplicate id", rpc(func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.Join(ctx, &pb.JoinRequest{Id: n2.ID, RaftAddr: "127.0.0.1:1", ApiAddr: "127.0.0.1:2"})
			return err
		}), codes.AlreadyExists, false},
		{"join/duplicate address", rpc(func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.Join(ctx, &pb.JoinRequest{Id: "n9", RaftAddr: n2.RaftAddr, ApiAddr: "127.0.0.1:2"})
			return err
		}), codes.AlreadyExists, false},
		{"remove/unknown id", rpc(func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.Remove(ctx, &pb.RemoveRequest{Id: "n9"})
			return err
		}), codes.NotFound, false},
		{"transfer/unknown id", rpc(func(ctx context.Context, c pb.RaftMQClient) error {
			_, err := c.Transfer(ctx, &pb.TransferRequest{Id: "n9"})
			return err
		}), codes.NotFound, false},
	}
}

// TestBadInputLiveCluster drives every gRPC method of a running three-node
// cluster, on the leader and on a follower, with the shared bad-input
// catalogue, the state-dependent cases above and malformed protobuf bytes,
// and asserts a clear error (code and a message naming the problem), that
// no node's state changed (offsets, topics, queue and group offsets,
// members, leader), and that the cluster still serves afterwards.
func TestBadInputLiveCluster(t *testing.T) {
	badInputCatalogue(t, startCluster(t, 3), client.Options{}, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

// TestBadInputLiveClusterTLS runs the same catalogue against a cluster
// with TLS on every port and authentication on, as an admin: bad input
// gets the same answers through the TLS listeners and the guard.
func TestBadInputLiveClusterTLS(t *testing.T) {
	pki := newPKI(t, filepath.Join(nodeproc.TempDir(t, "e2e-badinput-pki"), "pki"))
	c := startCluster(t, 3, pki.secure(t))
	token := pki.tokens["ops"]
	badInputCatalogue(t, c, pki.options(t, "ops"), grpc.WithTransportCredentials(credentials.NewTLS(pki.clientTLS(t, ""))),
		grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return invoker(bearerCtx(ctx, token), method, req, reply, cc, opts...)
		}))
}

// badInputCatalogue is the body of the bad-input tests: the Go client
// connects with opts, the raw gRPC connections with dial.
func badInputCatalogue(t *testing.T, c *nodeproc.Cluster, opts client.Options, dial ...grpc.DialOption) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	topic := badinput.Topic
	cl := newClient(t, ctx, c, opts)
	if err := cl.CreateTopic(ctx, topic, 4); err != nil {
		t.Fatal(err)
	}
	var msgs []client.Message
	for i := range 20 {
		msgs = append(msgs, client.NewMessage(topic, []byte(fmt.Sprintf("body %d", i))).WithKeys("k"))
	}
	res, err := cl.Send(ctx, msgs...)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.CommitOffset(ctx, "g", topic, 0, 2); err != nil {
		t.Fatal(err)
	}

	conns := make([]pb.RaftMQClient, len(c.Nodes))
	rawConns := make([]*grpc.ClientConn, len(c.Nodes))
	for i, p := range c.Nodes {
		cc, err := grpc.NewClient(p.Spec().APIAddr, append(dial, grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(128<<20)))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cc.Close() })
		conns[i], rawConns[i] = pb.NewRaftMQClient(cc), cc
	}
	settled(t, ctx, c)
	before := clusterState(t, ctx, c, conns)
	lead, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]int{"leader": lead, "follower": (lead + 1) % len(c.Nodes)}

	// unchanged waits for the followers to apply what the leader
	// committed, then compares every node's state with before.
	unchanged := func(t *testing.T, what string, noops bool) {
		t.Helper()
		settled(t, ctx, c)
		after := clusterState(t, ctx, c, conns)
		if err := compareStates(before, after, noops); err != nil {
			t.Fatalf("%s changed the cluster: %v", what, err)
		}
		before = after
	}
	check := func(t *testing.T, err error, want codes.Code) {
		t.Helper()
		st := status.Convert(err)
		if st.Code() != want {
			t.Fatalf("code %v (%q), want %v", st.Code(), st.Message(), want)
		}
		if want != codes.OK && len(st.Message()) < 10 {
			t.Fatalf("error message %q does not say what is wrong", st.Message())
		}
	}

	var cases []liveCase
	for _, bc := range badinput.Cases(limits()) {
		cases = append(cases, liveCase{bc.Name, bc.Call, bc.Code, false})
	}
	cases = append(cases, liveCases(c, topic, res[len(res)-1].PhysicalOffset+1)...)
	for role, idx := range targets {
		for _, tc := range cases {
			t.Run(role+"/"+tc.name, func(t *testing.T) {
				cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
				defer cancel()
				check(t, tc.call(cctx, conns[idx]), tc.code)
				unchanged(t, tc.name, tc.write)
			})
		}
		for _, m := range pb.RaftMQ_ServiceDesc.Methods {
			t.Run(role+"/garbage/"+m.MethodName, func(t *testing.T) {
				for _, garbage := range [][]byte{{0xff, 0xff, 0xff, 0xff}, {0x0a, 0x05, 'a'}, {0x08}} {
					var out []byte
					err := rawConns[idx].Invoke(ctx, "/"+pb.RaftMQ_ServiceDesc.ServiceName+"/"+m.MethodName, &garbage, &out, grpc.ForceCodec(rawCodec{}))
					st := status.Convert(err)
					if (st.Code() != codes.Internal && st.Code() != codes.InvalidArgument) || !strings.Contains(st.Message(), "unmarshal") {
						t.Fatalf("garbage %x: code %v %q, want a refusal naming unmarshalling", garbage, st.Code(), st.Message())
					}
				}
				unchanged(t, "garbage to "+m.MethodName, false)
			})
		}
	}
	t.Run("oversized request", func(t *testing.T) {
		huge := make([]byte, 64<<20+1)
		var out []byte
		err := rawConns[lead].Invoke(ctx, "/"+pb.RaftMQ_ServiceDesc.ServiceName+"/Send", &huge, &out, grpc.ForceCodec(rawCodec{}))
		if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "larger than max") {
			t.Fatalf("64 MiB + 1 request: %v %q, want ResourceExhausted naming the limit", st.Code(), st.Message())
		}
		unchanged(t, "oversized request", false)
	})

	// Still serving: a good send through every node is stored and readable.
	for _, p := range c.Nodes {
		r, err := conns[c.Index(p.Spec().ID)].Send(ctx, &pb.SendRequest{Messages: []*pb.Message{{Topic: topic, QueueId: 1, Body: []byte("after " + p.Spec().ID)}}})
		if err != nil || len(r.GetResults()) != 1 || r.GetResults()[0].GetErrorCode() != 0 {
			t.Fatalf("send through %s after the bad input: %v %v", p.Spec().ID, r, err)
		}
	}
	settled(t, ctx, c)
	after := clusterState(t, ctx, c, conns)
	for i := range after {
		if got, want := after[i].QueueOffsets[topic+"/1"][1], before[i].QueueOffsets[topic+"/1"][1]+3; got != want {
			t.Fatalf("node %d: queue 1 max offset %d after three good sends, want %d", i, got, want)
		}
	}
}
