package transport_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/message"
	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/transport"
	"github.com/raftmq/raftmq/transport/transporttest"
	"github.com/raftmq/raftmq/wire"
)

// staleFollower is a real store that lags the leader: it is not the leader,
// so it may not answer reads that must not go back in time.
type staleFollower struct {
	*transporttest.Local
	leaderAddr string
}

func (f *staleFollower) VerifyLeaderRead(context.Context) error {
	return fmt.Errorf("follower: %w", transport.ErrNotLeader)
}

func (f *staleFollower) Status() wire.ClusterStatus {
	st := f.Local.Status()
	st.ID, st.State, st.LeaderID, st.LeaderAPIAddr = "follower", "Follower", "local", f.leaderAddr
	return st
}

// A consumer group's committed offset read through a node that lags (found by
// cluster-tests: after a power loss the client's stale leader answered with an
// offset older than acknowledged commits) comes from the verified leader.
func TestQueryOffsetIsALeaderRead(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	leader := transporttest.StartT(t)
	lc := dial(t, leader.Addr)
	if _, err := lc.CreateTopic(ctx, &pb.CreateTopicRequest{Name: "T", Queues: 1}); err != nil {
		t.Fatal(err)
	}
	commit := func(c pb.RaftMQClient, off int64) {
		t.Helper()
		if _, err := c.CommitOffset(ctx, &pb.CommitOffsetRequest{Commits: []*pb.OffsetCommit{{Group: "g", Topic: "T", QueueId: 0, Offset: off}}}); err != nil {
			t.Fatal(err)
		}
	}
	local, addr := startStaleFollower(t, leader.Addr)
	// The follower's own store holds an old commit; the leader a newer one.
	if err := local.CreateTopic(ctx, store.TopicConfig{Name: "T", Queues: 1}); err != nil {
		t.Fatal(err)
	}
	if err := local.CommitOffsets(ctx, []store.OffsetCommit{{Group: "g", Topic: "T", QueueID: 0, Offset: 5}}); err != nil {
		t.Fatal(err)
	}
	commit(lc, 9)
	resp, err := dial(t, addr).QueryOffset(ctx, &pb.QueryOffsetRequest{Group: "g", Topic: "T", QueueId: 0})
	if err != nil {
		t.Fatal(err)
	}
	if !resp.GetFound() || resp.GetOffset() != 9 {
		t.Fatalf("query through the lagging node: offset %d found %v, want the leader's 9", resp.GetOffset(), resp.GetFound())
	}
}

// startStaleFollower serves a node whose own store is separate from the
// leader's and that is not the leader; it returns its store and address.
func startStaleFollower(t *testing.T, leaderAddr string) (*transporttest.Local, string) {
	t.Helper()
	local, err := transporttest.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	follower := &staleFollower{Local: local, leaderAddr: leaderAddr}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := transport.NewServer(follower, transport.ServerOptions{})
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	t.Cleanup(func() {
		stopCtx, stop := context.WithTimeout(context.Background(), 5*time.Second)
		defer stop()
		srv.Stop(stopCtx)
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		if err := local.Close(); err != nil {
			t.Error(err)
		}
	})
	return local, lis.Addr().String()
}

// A message read by its offset (or offset msg id) through a node that has not
// applied that far (found by cluster-tests: after a power loss of the whole
// cluster the client's stale leader, now a follower still replaying, answered
// "beyond the applied log" for an acknowledged message) comes from the
// verified leader; an offset the node holds is read locally.
func TestLookupBeyondLocalLogIsALeaderRead(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	leader := transporttest.StartT(t)
	lc := dial(t, leader.Addr)
	local, addr := startStaleFollower(t, leader.Addr)
	fc := dial(t, addr)
	for _, c := range []pb.RaftMQClient{lc, fc} {
		if _, err := c.CreateTopic(ctx, &pb.CreateTopicRequest{Name: "T", Queues: 1}); err != nil {
			t.Fatal(err)
		}
	}
	own, err := local.Send(ctx, []message.Message{{Topic: "T", Body: []byte("own")}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := lc.Send(ctx, &pb.SendRequest{Messages: []*pb.Message{
		{Topic: "T", Body: []byte("leader 1")}, {Topic: "T", Body: []byte("leader 2")}}})
	if err != nil {
		t.Fatal(err)
	}
	second := resp.GetResults()[1]
	if followerEnd := own[0].PhysicalOffset + int64(own[0].Size); second.GetPhysicalOffset() < followerEnd {
		t.Fatalf("leader's second message at %d, not beyond the follower's log (%d)", second.GetPhysicalOffset(), followerEnd)
	}
	body := func(r *pb.QueryMessagesResponse, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if len(r.GetMessages()) != 1 {
			t.Fatalf("%d messages, want 1", len(r.GetMessages()))
		}
		return string(r.GetMessages()[0].GetBody())
	}
	if got := body(fc.QueryByOffset(ctx, &pb.QueryByOffsetRequest{PhysicalOffset: own[0].PhysicalOffset})); got != "own" {
		t.Fatalf("offset the follower holds reads %q, want its own record", got)
	}
	if got := body(fc.QueryByOffset(ctx, &pb.QueryByOffsetRequest{PhysicalOffset: second.GetPhysicalOffset()})); got != "leader 2" {
		t.Fatalf("offset beyond the follower's log reads %q, want the leader's", got)
	}
	if got := body(fc.QueryByMsgID(ctx, &pb.QueryByMsgIDRequest{MsgId: second.GetOffsetMsgId()})); got != "leader 2" {
		t.Fatalf("offset msg id beyond the follower's log reads %q, want the leader's", got)
	}
	beyond := second.GetPhysicalOffset() + 1<<20
	_, err = fc.QueryByOffset(ctx, &pb.QueryByOffsetRequest{PhysicalOffset: beyond})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("offset beyond every log: %v, want the leader's out-of-range refusal", err)
	}
}
