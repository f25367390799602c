// Package transporttest provides a single-node transport.Backend over a real
// store.Store, without Raft, for tests and runnable examples of the server,
// the client and the CLI. Writes are applied to the store directly, in the
// order they arrive, with a local Raft index counter.
package transporttest

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/membership"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/transport"
	"github.com/raftmq/raftmq/vfs"
	"github.com/raftmq/raftmq/wire"
)

// ErrUnsupported is returned by the membership methods.
var ErrUnsupported = errors.New("transporttest: not supported by the local backend")

// Local is a transport.Backend that applies writes straight to a store.
type Local struct {
	st      *store.Store
	host    message.HostPort
	mu      sync.Mutex // serialises writes and the index counter
	index   uint64
	apiAddr string
	members *membership.Table[struct{}]
}

// OpenLocal opens (or recovers) a store in dir and wraps it.
func OpenLocal(dir string) (*Local, error) {
	cfg := store.DefaultConfig(dir)
	cfg.CommitLogFileSize = 64 << 20
	cfg.ConsumeQueueFileSize = 20 * 30_000
	cfg.IndexMaxHashSlots = 50_000
	cfg.IndexMaxIndexes = 200_000
	cfg.PreTouch = false
	st, err := store.Open(vfs.OS(), cfg)
	if err != nil {
		return nil, err
	}
	idx, _ := st.Applied()
	return &Local{st: st, index: idx, host: message.HostPort{IP: [4]byte{127, 0, 0, 1}, Port: 9001},
		members: membership.New[struct{}](LocalMemberExpiry, nil)}, nil
}

// Close closes the store.
func (l *Local) Close() error { return l.st.Close() }

// SetAPIAddr sets the address Status reports for this node (the leader).
func (l *Local) SetAPIAddr(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.apiAddr = addr
	if hp, err := message.ParseHostPort(addr); err == nil {
		l.host = hp
	}
}

// next returns the header of the next entry (mu held).
func (l *Local) next() store.EntryHeader {
	l.index++
	return store.EntryHeader{RaftIndex: l.index, Term: 1, StoreTimestamp: time.Now().UnixMilli(), StoreHost: l.host}
}

// command applies a non-message write; a deterministic rejection still
// marks the index applied, as the FSM does.
func (l *Local) command(apply func(h store.EntryHeader) error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.next()
	if err := apply(h); err != nil {
		return errors.Join(err, l.st.MarkApplied(h))
	}
	return nil
}

// Send appends msgs as one entry.
func (l *Local) Send(ctx context.Context, msgs []message.Message) ([]store.PutResult, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st.AppendMessages(l.next(), msgs, nil)
}

// DeliverDue delivers the delayed messages due now, as a cluster's
// scheduler does (this backend runs no scheduler), and returns how many.
func (l *Local) DeliverDue() (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st.DeliverDue(l.next())
}

// CommitOffsets stores consumer offsets.
func (l *Local) CommitOffsets(ctx context.Context, commits []store.OffsetCommit) error {
	return l.command(func(h store.EntryHeader) error { return l.st.CommitOffsets(h, commits) })
}

// CreateTopic creates a topic.
func (l *Local) CreateTopic(ctx context.Context, t store.TopicConfig) error {
	return l.command(func(h store.EntryHeader) error { return l.st.CreateTopic(h, t) })
}

// UpdateTopic grows a topic's queues and/or changes its perm.
func (l *Local) UpdateTopic(ctx context.Context, t store.TopicConfig) error {
	return l.command(func(h store.EntryHeader) error { return l.st.UpdateTopic(h, t) })
}

// DeleteTopic deletes a topic.
func (l *Local) DeleteTopic(ctx context.Context, name string) error {
	return l.command(func(h store.EntryHeader) error { return l.st.DeleteTopic(h, name) })
}

// Join is not supported.
func (l *Local) Join(ctx context.Context, id, raftAddr, apiAddr string) error { return ErrUnsupported }

// Remove is not supported.
func (l *Local) Remove(ctx context.Context, id string) error { return ErrUnsupported }

// Transfer is not supported.
func (l *Local) Transfer(ctx context.Context, id string) error { return ErrUnsupported }

// Reader is the store's read side.
func (l *Local) Reader() store.Reader { return l.st }

// LocalMemberExpiry is how long a silent group member stays (as on a node).
const LocalMemberExpiry = 10 * time.Second

// JoinGroup tracks consumer-group members as a node's leader does
// (transport.GroupCoordinator).
func (l *Local) JoinGroup(_ context.Context, group, clientID string, leave bool) ([]string, time.Duration, error) {
	switch {
	case leave:
		l.members.Leave(group, clientID)
	case clientID != "":
		l.members.Beat(group, clientID, struct{}{})
	}
	return l.members.Members(group), LocalMemberExpiry, nil
}

// Status reports a single-node cluster led by this node.
func (l *Local) Status() wire.ClusterStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.st.Stats()
	return wire.ClusterStatus{ID: "local", State: "Leader", LeaderID: "local", LeaderAPIAddr: l.apiAddr,
		Term: 1, CommitIndex: l.index, AppliedIndex: st.AppliedIndex, ConfirmOffset: st.ConfirmOffset,
		MinOffset: st.MinOffset, MaxOffset: st.MaxOffset,
		Members: []wire.Member{{ID: "local", APIAddr: l.apiAddr, Suffrage: wire.SuffrageVoter}}}
}

// Server is a running transport.Server over a Local backend.
type Server struct {
	Addr    string
	Backend *Local
	srv     *transport.Server
	done    chan error
}

// Start opens a Local backend in dir and serves it on a loopback port.
func Start(dir string) (*Server, error) { return StartWith(dir, transport.ServerOptions{}) }

// StartWith is Start with server options (auth, quotas, credentials).
func StartWith(dir string, opts transport.ServerOptions) (*Server, error) {
	b, err := OpenLocal(dir)
	if err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = b.Close()
		return nil, err
	}
	b.SetAPIAddr(lis.Addr().String())
	s := &Server{Addr: lis.Addr().String(), Backend: b, srv: transport.NewServer(b, opts), done: make(chan error, 1)}
	go func() { s.done <- s.srv.Serve(lis) }()
	return s, nil
}

// Close stops the server and closes the store.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.srv.Stop(ctx)
	return errors.Join(<-s.done, s.Backend.Close())
}

// StartT is Start for a test: a temp dir, Fatal on error, Close at cleanup.
func StartT(t testing.TB) *Server {
	t.Helper()
	return StartTWith(t, transport.ServerOptions{})
}

// StartTWith is StartT with server options.
func StartTWith(t testing.TB, opts transport.ServerOptions) *Server {
	t.Helper()
	s, err := StartWith(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("transporttest: close: %v", err)
		}
	})
	return s
}

// GuardStats are the server's refusal counters.
func (s *Server) GuardStats() transport.GuardStats { return s.srv.GuardStats() }
