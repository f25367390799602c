package transport

import (
	"context"
	"errors"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
	"github.com/raftmq/raftmq/wire"
)

// MetadataForwarded marks a request a follower forwarded to the leader. A
// forwarded request that meets a non-leader fails instead of hopping again.
const MetadataForwarded = "raftmq-forwarded"

// forwarder caches one client connection per leader address.
type forwarder struct {
	dialOpts []grpc.DialOption
	mu       sync.Mutex
	conns    map[string]*grpc.ClientConn
}

// newForwarder dials leaders with opts (default insecure), and with the
// server's own message limits (MaxRequestBytes, MaxResponseBytes), so that
// any request the follower accepted fits the hop to the leader.
func newForwarder(opts []grpc.DialOption) *forwarder {
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	limits := grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(wire.MaxResponseBytes), grpc.MaxCallSendMsgSize(wire.MaxRequestBytes))
	opts = append([]grpc.DialOption{limits}, opts...)
	return &forwarder{dialOpts: opts, conns: map[string]*grpc.ClientConn{}}
}

func (f *forwarder) client(addr string) (pb.RaftMQClient, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns == nil {
		return nil, status.Error(codes.Unavailable, "node is shutting down")
	}
	cc, ok := f.conns[addr]
	if !ok {
		var err error
		cc, err = grpc.NewClient(addr, f.dialOpts...)
		if err != nil {
			return nil, status.Errorf(codes.Unavailable, "leader address %q: %v", addr, err)
		}
		f.conns[addr] = cc
	}
	return pb.NewRaftMQClient(cc), nil
}

func (f *forwarder) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, cc := range f.conns {
		_ = cc.Close()
	}
	f.conns = nil
}

func isForwarded(ctx context.Context) bool {
	md, ok := metadata.FromIncomingContext(ctx)
	return ok && len(md.Get(MetadataForwarded)) > 0
}

// forward sends a write the backend refused with ErrNotLeader (or
// ErrNoLeader) to the leader, at most one hop. Errors raised by the leader's
// handler come back unchanged; a failure on the way that may have happened
// after the leader received the request becomes "outcome unknown".
func forward[R any](s *Server, ctx context.Context, err error, call func(context.Context, pb.RaftMQClient) (R, error)) (R, error) {
	var zero R
	if !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrNoLeader) {
		return zero, toStatus(err)
	}
	st := s.b.Status()
	leader := st.LeaderAPIAddr
	if errors.Is(err, ErrNoLeader) || leader == "" {
		return zero, notLeaderStatus(wire.ReasonNoLeader, "")
	}
	if isForwarded(ctx) || st.LeaderID == st.ID {
		// Already one hop, or our view is stale: let the client re-resolve.
		return zero, notLeaderStatus(wire.ReasonNotLeader, leader)
	}
	c, cerr := s.fwd.client(leader)
	if cerr != nil {
		return zero, cerr
	}
	s.log.Debug("forwarding to leader", "leader", leader)
	out, ferr := call(metadata.AppendToOutgoingContext(ctx, MetadataForwarded, st.ID), c)
	if ferr == nil {
		return out, nil
	}
	return zero, classifyForwardErr(ferr)
}

// classifyForwardErr keeps errors that are definite (the leader's handler
// answered, or the request provably never left) and turns transport failures
// after sending into codes.Unknown.
func classifyForwardErr(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return status.Error(codes.Unknown, outcomeUnknownMsg+": "+err.Error())
	}
	if wire.NotSent(err) {
		if r, _ := wire.RetryReason(err); r != "" {
			return err
		}
		return retrySafeStatus(wire.ReasonNoLeader, "", "leader unreachable: "+st.Message())
	}
	switch st.Code() {
	case codes.Unavailable, codes.Internal:
		return status.Error(codes.Unknown, outcomeUnknownMsg+": forwarding to the leader: "+st.Message())
	}
	return err
}
