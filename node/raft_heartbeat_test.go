package node

import (
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// TestHeartbeatFastPathNeverChangesTerm: a heartbeat of a newer term that
// reaches a leader over the TCP transport (whose fast path runs it on the
// transport's goroutine, beside the leader loop) must not step the leader
// down or change its term there. In hashicorp/raft v1.8.0 it did both, and
// a leader loop dispatching a client entry at that moment stamped it with
// the newer term, at an index where the newer leader had another entry of
// that term: the replicas then applied different entries at one index
// (upstream issue 695; found by raftmq's chaos suite, seed 20261231). The
// fork (third_party/raft FORK.md, patch 3) refuses such a heartbeat; the
// newer leader's next replicating AppendEntries, which the main loop
// handles, makes the change.
func TestHeartbeatFastPathNeverChangesTerm(t *testing.T) {
	r, trans := soloLeader(t, nil)
	term := func() uint64 {
		n, err := strconv.ParseUint(r.Stats()["term"], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := term()

	client, err := raft.NewTCPTransport("127.0.0.1:0", nil, 3, 5*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	hb := raft.AppendEntriesRequest{ // what a heartbeat of a newer leader "b" looks like on the wire
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("b"), Addr: []byte(client.LocalAddr())},
		Term:      before + 5,
	}
	var resp raft.AppendEntriesResponse
	if err := client.AppendEntries("a", trans.LocalAddr(), &hb, &resp); err != nil {
		t.Fatal(err)
	}
	if got := term(); got != before || r.State() != raft.Leader {
		t.Fatalf("after a term-%d heartbeat the leader of term %d is %v in term %d: the fast path changed them", before+5, before, r.State(), got)
	}
	if resp.Success || resp.Term != before {
		t.Fatalf("heartbeat answered %+v, want a refusal carrying term %d", resp, before)
	}
}

// TestHeartbeatRetriedAfterFailure: when a follower is killed and restarted
// on its address, the leader's next heartbeat goes out on a pooled connection
// to the dead process and fails. hashicorp/raft v1.8.0 then waited a whole
// heartbeat interval (HeartbeatTimeout/10, randomised up to twice that)
// before the next one, so a restarted follower learnt of its leader up to
// 150 ms late with raftmq's settings; and the refused dials while the
// follower starts grew the backoff to tens or hundreds of milliseconds.
// The fork (third_party/raft FORK.md, patch 6) retries after the failure's
// backoff alone, 10 ms for the first failures. With a 20 s heartbeat timeout
// (intervals of 2-4 s) the restarted follower must hear a heartbeat soon
// after it listens again.
func TestHeartbeatRetriedAfterFailure(t *testing.T) {
	r, _ := soloLeader(t, func(conf *raft.Config) {
		conf.CommitTimeout = time.Minute // only heartbeats reach the follower once it has the log
	})
	const heartbeatTimeout = 20 * time.Second
	slowHeartbeatTimeout(t, r, heartbeatTimeout)
	failed := make(chan raft.Observation, 16)
	r.RegisterObserver(raft.NewObserver(failed, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.FailedHeartbeatObservation)
		return ok
	}))

	addr := freeAddrs(t, 1)[0]
	follower := startHeartbeatFollower(t, addr)
	if err := r.AddNonvoter("b", raft.ServerAddress(addr), 0, 10*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	follower.awaitHeartbeat(t, 3*heartbeatTimeout/10)
	follower.kill()

	// The first heartbeat after the kill fails on the pooled connection,
	// the next ones on refused dials while the follower is down: it comes
	// back after the eighth failure, when v1.8.0's backoff had grown to
	// 640 ms (10 ms doubling from the third failure).
	const downFor = 8
	for i := 0; i < downFor; i++ {
		select {
		case <-failed:
		case <-time.After(3 * heartbeatTimeout / 10):
			t.Fatalf("%d heartbeats failed after the follower was killed, want %d: the fault did not happen", i, downFor)
		}
	}
	restartedAt := time.Now()
	restarted := startHeartbeatFollower(t, addr)
	defer restarted.kill()
	heardAt := restarted.awaitHeartbeat(t, 3*heartbeatTimeout/10)
	if gap := heardAt.Sub(restartedAt); gap > 300*time.Millisecond {
		t.Fatalf("the restarted follower heard the leader %v after it listened again, want within a short backoff (10 ms), not a grown one or another interval (%v)", gap, heartbeatTimeout/10)
	}
}

// TestHeartbeatInterval: the leader heartbeats a follower every
// Config.HeartbeatInterval (randomised up to twice that) whatever the
// heartbeat timeout (the fork's patch 7; v1.8.0 always waited
// HeartbeatTimeout/10). With a 20 s timeout and a 20 ms interval a follower
// must hear many heartbeats in 2 s, not one.
func TestHeartbeatInterval(t *testing.T) {
	r, _ := soloLeader(t, func(conf *raft.Config) {
		conf.HeartbeatInterval = 20 * time.Millisecond
		conf.CommitTimeout = time.Minute
	})
	slowHeartbeatTimeout(t, r, 20*time.Second)
	addr := freeAddrs(t, 1)[0]
	follower := startHeartbeatFollower(t, addr)
	defer follower.kill()
	if err := r.AddNonvoter("b", raft.ServerAddress(addr), 0, 10*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	follower.awaitHeartbeat(t, 10*time.Second)
	heard := 0
	for deadline := time.After(2 * time.Second); ; {
		select {
		case <-follower.heartbeats:
			heard++
			continue
		case <-deadline:
		}
		break
	}
	if heard < 10 {
		t.Fatalf("the follower heard %d heartbeats in 2 s with a 20 ms interval (20-40 ms apart), want at least 10", heard)
	}
}

// soloLeader starts a Raft server "a" over TCP with in-memory stores, 50 ms
// timeouts changed by tune, bootstraps it as the only voter and waits until
// it leads; it shuts down when the test ends.
func soloLeader(t *testing.T, tune func(*raft.Config)) (*raft.Raft, *raft.NetworkTransport) {
	t.Helper()
	trans, err := raft.NewTCPTransport("127.0.0.1:0", nil, 3, 5*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	conf := raft.DefaultConfig()
	conf.LocalID = "a"
	conf.Logger = hclog.NewNullLogger()
	conf.HeartbeatTimeout, conf.ElectionTimeout, conf.LeaderLeaseTimeout = 50*time.Millisecond, 50*time.Millisecond, 50*time.Millisecond
	if tune != nil {
		tune(conf)
	}
	logs := raft.NewInmemStore()
	r, err := raft.NewRaft(conf, &raft.MockFSM{}, logs, logs, raft.NewInmemSnapshotStore(), trans)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Shutdown().Error(); err != nil {
			t.Error(err)
		}
	})
	if err := r.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{ID: "a", Address: trans.LocalAddr()}}}).Error(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.LeaderCh():
	case <-time.After(10 * time.Second):
		t.Fatal("no leader")
	}
	return r, trans
}

// slowHeartbeatTimeout raises r's heartbeat and election timeouts once it
// leads (a lone voter elected itself after the short ones): the heartbeat
// interval that derives from them is then a tenth of timeout.
func slowHeartbeatTimeout(t *testing.T, r *raft.Raft, timeout time.Duration) {
	t.Helper()
	rc := r.ReloadableConfig()
	rc.HeartbeatTimeout, rc.ElectionTimeout = timeout, timeout
	if err := r.ReloadConfig(rc); err != nil {
		t.Fatal(err)
	}
}

// heartbeatFollower answers every AppendEntries with success and reports the
// heartbeats (no entries, no log position) it receives; kill closes its
// listener and every connection it accepted, as the death of its process
// would.
type heartbeatFollower struct {
	trans      *raft.NetworkTransport
	stream     *trackingStream
	heartbeats chan time.Time
	stop, done chan struct{}
}

func startHeartbeatFollower(t *testing.T, addr string) *heartbeatFollower {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	f := &heartbeatFollower{stream: &trackingStream{Listener: ln}, heartbeats: make(chan time.Time, 64), stop: make(chan struct{}), done: make(chan struct{})}
	f.trans = raft.NewNetworkTransport(f.stream, 3, 5*time.Second, io.Discard)
	go f.serve()
	return f
}

func (f *heartbeatFollower) serve() {
	defer close(f.done)
	for {
		select {
		case rpc := <-f.trans.Consumer():
			req, ok := rpc.Command.(*raft.AppendEntriesRequest)
			if !ok {
				rpc.Respond(nil, fmt.Errorf("unexpected %T", rpc.Command))
				continue
			}
			if len(req.Entries) == 0 && req.PrevLogEntry == 0 && req.LeaderCommitIndex == 0 {
				select {
				case f.heartbeats <- time.Now():
				default:
				}
			}
			rpc.Respond(&raft.AppendEntriesResponse{Term: req.Term, LastLog: req.PrevLogEntry + uint64(len(req.Entries)), Success: true}, nil)
		case <-f.stop:
			return
		}
	}
}

func (f *heartbeatFollower) awaitHeartbeat(t *testing.T, within time.Duration) time.Time {
	t.Helper()
	select {
	case at := <-f.heartbeats:
		return at
	case <-time.After(within):
		t.Fatalf("no heartbeat within %v", within)
		return time.Time{}
	}
}

func (f *heartbeatFollower) kill() {
	close(f.stop)
	_ = f.trans.Close()
	f.stream.closeAccepted()
	<-f.done
}

// trackingStream is a raft.StreamLayer that remembers the connections it
// accepted so that they can be closed with it.
type trackingStream struct {
	net.Listener
	mu       sync.Mutex
	accepted []net.Conn
}

func (s *trackingStream) Accept() (net.Conn, error) {
	c, err := s.Listener.Accept()
	if err == nil {
		s.mu.Lock()
		s.accepted = append(s.accepted, c)
		s.mu.Unlock()
	}
	return c, err
}

func (s *trackingStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(addr), timeout)
}

func (s *trackingStream) closeAccepted() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.accepted {
		_ = c.Close()
	}
	s.accepted = nil
}
