package client

import (
	"errors"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
	"github.com/raftmq/raftmq/wire"
)

// dyingListener accepts connections and resets them at once, as the socket
// of a node being killed does: the TCP connect succeeds, the HTTP/2 preface
// never comes. It returns the address and a func that closes the listener
// and reports how many connections it reset.
func dyingListener(t *testing.T) (string, func() int) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan int, 1)
	go func() {
		n := 0
		defer func() { accepted <- n }()
		for {
			conn, err := lis.Accept()
			if err != nil {
				return
			}
			n++
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // close with a reset
			}
			_ = conn.Close()
		}
	}()
	return lis.Addr().String(), func() int {
		_ = lis.Close()
		return <-accepted
	}
}

// A write to a node that dies while the client connects never reached it:
// every try must be retry-safe, whichever of grpc-go's connection-setup
// errors it gets (a reset while writing the client preface, while reading
// the server's, or the stored error of the last attempt).
func TestWriteToDyingListenerIsNotSent(t *testing.T) {
	addr, stop := dyingListener(t)
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(markNotSent))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	rc := pb.NewRaftMQClient(cc)
	for i := range 20 {
		_, err := rc.Send(t.Context(), &pb.SendRequest{})
		if status.Code(err) != codes.Unavailable || !retrySafe(err) {
			t.Fatalf("try %d: %v: want Unavailable and retry-safe", i, err)
		}
		if got := classify(err, true); !IsOutcomeUnknown(got) {
			t.Fatalf("the wrapper hid the gRPC status from classify: %v", got)
		}
	}
	if n := stop(); n == 0 {
		t.Fatal("the listener reset no connection: the fault was not exercised")
	}
}

// A leader read never falls back to a follower: with no leader known the
// client asks for one, and with none anywhere the read waits (retries)
// instead of reading a follower that may lag an acknowledged write.
func TestLeaderReadDoesNotFallBackToFollower(t *testing.T) {
	leader, follower, lAddr, fAddr := cluster(t)
	c := newClient(t, fAddr)
	for _, f := range []*fakeNode{leader, follower} {
		f.set(func(f *fakeNode) { f.status = wire.ClusterStatus{ID: "x"} })
	}
	c.setLeader("")
	for attempt := range 4 {
		if addr, err := c.readAddr(testCtx(t), attempt); err == nil || !errors.Is(err, ErrUnavailable) {
			t.Fatalf("attempt %d with no leader anywhere: read goes to %q (err %v), want ErrUnavailable", attempt, addr, err)
		}
	}
	follower.set(func(f *fakeNode) { f.status = wire.ClusterStatus{ID: "n2", LeaderID: "n1", LeaderAPIAddr: lAddr} })
	for attempt := range 4 {
		if addr, err := c.readAddr(testCtx(t), attempt); err != nil || addr != lAddr {
			t.Fatalf("attempt %d: read goes to %q (err %v), want the leader %s", attempt, addr, err, lAddr)
		}
	}
	// ReadFromAny spreads reads over the endpoints, followers included.
	c.opts.ReadFromAny = true
	seen := map[string]bool{}
	for attempt := range 4 {
		addr, err := c.readAddr(testCtx(t), attempt)
		if err != nil {
			t.Fatal(err)
		}
		seen[addr] = true
	}
	if !seen[fAddr] || !seen[lAddr] {
		t.Fatalf("ReadFromAny reads went to %v, want both nodes", seen)
	}
}
