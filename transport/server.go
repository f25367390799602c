package transport

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/raftmq/raftmq/auth"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
	"github.com/raftmq/raftmq/wire"
)

// ServerOptions configure a Server. Zero values take the defaults.
type ServerOptions struct {
	Logger         hclog.Logger
	MaxRecvMsgSize int           // of a request, default MaxRequestBytes (64 MiB)
	MaxMessageSize int           // body limit, default 4 MiB (store.Config.MaxMessageSize)
	HealthInterval time.Duration // how often health follows the backend's leader, default 500 ms
	// ForwardDialOptions are used to dial the leader; default insecure.
	ForwardDialOptions []grpc.DialOption
	// Now is the clock for defaulted born timestamps; default time.Now.
	Now func() time.Time
	// GRPC are extra gRPC server options (the node's metrics interceptors,
	// its TLS credentials).
	GRPC []grpc.ServerOption
	// Auth, when set, authenticates every RPC (bearer token or verified
	// client certificate) and authorizes it by its request (see needs);
	// the health service stays open.
	Auth *auth.Authenticator
	// Quotas are the per-client limits (zero: none).
	Quotas Quotas
}

func (o *ServerOptions) defaults() {
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.MaxRecvMsgSize <= 0 {
		o.MaxRecvMsgSize = wire.MaxRequestBytes
	}
	if o.MaxMessageSize <= 0 {
		o.MaxMessageSize = 4 << 20
	}
	if o.HealthInterval <= 0 {
		o.HealthInterval = 500 * time.Millisecond
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Server is the client-facing gRPC server of one node.
type Server struct {
	pb.UnimplementedRaftMQServer

	b      Backend
	opts   ServerOptions
	log    hclog.Logger
	grpc   *grpc.Server
	health *health.Server
	fwd    *forwarder
	rr     atomic.Uint32 // round-robin queue choice for queue_id -1
	pulled topicCounts   // messages answered by Pull, per topic
	guard  guard

	stopOnce sync.Once
	stop     chan struct{}
	wg       sync.WaitGroup
}

// NewServer returns a server for b; call Serve to start it.
// streamWorkers is how many goroutines serve streams (grpc.NumStreamWorkers).
const streamWorkers = 1024

func NewServer(b Backend, opts ServerOptions) *Server {
	opts.defaults()
	s := &Server{
		b:      b,
		opts:   opts,
		log:    opts.Logger.Named("transport"),
		health: health.NewServer(),
		fwd:    newForwarder(opts.ForwardDialOptions),
		stop:   make(chan struct{}),
	}
	s.guard = guard{s: s, auth: opts.Auth}
	if opts.Quotas.Enabled() {
		s.guard.quotas = newQuotas(opts.Quotas)
	}
	s.grpc = grpc.NewServer(append(append([]grpc.ServerOption{grpc.MaxRecvMsgSize(opts.MaxRecvMsgSize), grpc.MaxSendMsgSize(max(opts.MaxRecvMsgSize, wire.MaxResponseBytes)),
		grpc.ForceServerCodecV2(newPullCodec()),
		// Pull answers are ~1 MiB: write them in fewer, larger syscalls.
		grpc.WriteBufferSize(512 << 10),
		// Receive windows that hold what producers keep in flight: with
		// gRPC's 64 KiB default (grown only by its BDP estimate) 2,000
		// pipelined 1 KiB Sends sat in the client behind flow control, the
		// leader saw a trickle, and group commit formed small entries
		// (goroutine profile: 1,870 handlers waiting for their request's
		// DATA frame, 65 in the batcher). The leader's bounded group-commit
		// queue, not the transport, is the backpressure.
		grpc.InitialWindowSize(4 << 20), grpc.InitialConnWindowSize(16 << 20),
		// Handlers run on long-lived goroutines whose stacks have grown
		// already: a fresh goroutine per stream spent 11 % of the leader's
		// CPU growing and copying its stack (runtime.newstack, CPU profile
		// of 4 producers x 500 single 1 KiB sends). When every worker is
		// busy (Sends waiting for their entry, long polls), gRPC starts a
		// goroutine as before.
		grpc.NumStreamWorkers(streamWorkers)}, opts.GRPC...),
		// After the metrics interceptors: refusals are counted too.
		grpc.ChainUnaryInterceptor(s.guard.unary), grpc.ChainStreamInterceptor(s.guard.stream))...)
	pb.RegisterRaftMQServer(s.grpc, s)
	healthpb.RegisterHealthServer(s.grpc, s.health)
	reflection.Register(s.grpc)
	s.updateHealth()
	s.wg.Add(1)
	go s.followHealth()
	return s
}

// GetServiceInfo lists the gRPC services served (for metrics that start
// every method's counters at zero).
func (s *Server) GetServiceInfo() map[string]grpc.ServiceInfo { return s.grpc.GetServiceInfo() }

// Serve accepts connections on lis until Stop; it returns nil after Stop.
func (s *Server) Serve(lis net.Listener) error {
	err := s.grpc.Serve(lis)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// Stop stops the server: GracefulStop bounded by ctx, then a hard Stop. It
// waits for the server's goroutines and closes the connections to the leader.
func (s *Server) Stop(ctx context.Context) {
	s.stopOnce.Do(func() {
		close(s.stop)
		s.health.Shutdown()
		done := make(chan struct{})
		go func() { s.grpc.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			s.grpc.Stop()
			<-done
		}
		s.wg.Wait()
		s.fwd.close()
	})
}

func (s *Server) followHealth() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.HealthInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.updateHealth()
		}
	}
}

// updateHealth sets the overall ("") and RaftMQ service health: SERVING
// while the backend knows a leader.
func (s *Server) updateHealth() {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if s.b.Status().HasLeader() {
		st = healthpb.HealthCheckResponse_SERVING
	}
	s.health.SetServingStatus("", st)
	s.health.SetServingStatus(pb.RaftMQ_ServiceDesc.ServiceName, st)
}
