package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/transport"

	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
)

// brokerAddrTTL is how long a peer's broker address (its --remoting-addr,
// read from its Status) is used before it is asked again; brokerAskTimeout
// bounds one ask.
const (
	brokerAddrTTL    = 10 * time.Second
	brokerAskTimeout = time.Second
)

// remotingServers are the node's RocketMQ listeners (either may be off).
type remotingServers struct {
	broker           *broker.Broker
	brokerLis, nsLis net.Listener
	brokerSrv, nsSrv *remoting.Server
}

// listenRemoting opens the broker and name-server listeners that are on.
func (n *Node) listenRemoting() error {
	var err error
	if n.cfg.RemotingAddr != "" {
		if n.remoting.brokerLis, err = n.sec.listen(n.cfg.RemotingAddr); err != nil {
			return fmt.Errorf("node: remoting listen: %w", err)
		}
	}
	if n.cfg.NamesrvAddr != "" {
		if n.remoting.nsLis, err = n.sec.listen(n.cfg.NamesrvAddr); err != nil {
			return fmt.Errorf("node: name-server listen: %w", err)
		}
	}
	return nil
}

// serveRemoting starts the RocketMQ servers on the open listeners.
func (n *Node) serveRemoting() {
	if n.remoting.brokerLis == nil && n.remoting.nsLis == nil {
		return
	}
	sc := n.cfg.storeConfig()
	n.remoting.broker = broker.New(brokerBackend{n}, broker.Options{AutoCreateTopics: sc.AutoCreateTopics,
		DefaultQueues: sc.DefaultQueues, Logger: n.log.Named("broker"), Auth: n.sec.auth, RelayTLS: n.sec.peerTLS(),
		Produce: n.produceQuota})
	serve := func(srv **remoting.Server, lis net.Listener, h remoting.Handler, what string) {
		if lis == nil {
			return
		}
		*srv = remoting.NewServer(h, remoting.Options{MaxFrame: remotingMaxFrame(sc), Logger: n.log.Named(what)})
		s := *srv
		n.goroutine(func() {
			if err := s.Serve(lis); err != nil && !errors.Is(err, remoting.ErrServerClosed) {
				n.onFatal(fmt.Errorf("node: %s server: %w", what, err))
			}
		})
	}
	serve(&n.remoting.brokerSrv, n.remoting.brokerLis, n.remoting.broker, "remoting")
	serve(&n.remoting.nsSrv, n.remoting.nsLis, n.remoting.broker.NameServer(), "namesrv")
}

// remotingMaxFrame admits a batch of the largest messages the store takes
// (a SEND_BATCH_MESSAGE of 4 MiB bodies) with room for headers.
func remotingMaxFrame(sc store.Config) int {
	return max(remoting.DefaultMaxFrame, int(sc.MaxMessageSize)+1<<20)
}

// closeRemoting stops the RocketMQ servers (their Close waits for their
// handlers) and the broker's relay connections.
func (n *Node) closeRemoting() {
	for _, s := range []*remoting.Server{n.remoting.brokerSrv, n.remoting.nsSrv} {
		if s != nil {
			_ = s.Close()
		}
	}
	for i, lis := range []net.Listener{n.remoting.brokerLis, n.remoting.nsLis} {
		srv := []*remoting.Server{n.remoting.brokerSrv, n.remoting.nsSrv}[i]
		if lis != nil && srv == nil {
			_ = lis.Close()
		}
	}
	if n.remoting.broker != nil {
		_ = n.remoting.broker.Close()
	}
}

// RemotingAddr is the bound broker address ("" when off).
func (n *Node) RemotingAddr() string {
	if n.remoting.brokerLis == nil {
		return ""
	}
	return n.remoting.brokerLis.Addr().String()
}

// NamesrvAddr is the bound name-server address ("" when off).
func (n *Node) NamesrvAddr() string {
	if n.remoting.nsLis == nil {
		return ""
	}
	return n.remoting.nsLis.Addr().String()
}

// BrokerStats are the RocketMQ broker's counters (zero when it is off).
func (n *Node) BrokerStats() broker.Stats {
	if n.remoting.broker == nil {
		return broker.Stats{}
	}
	return n.remoting.broker.Stats()
}

// brokerBackend is the node as package broker sees it: its sends, offset
// commits and topic creations, with the node's errors mapped to the
// broker's.
type brokerBackend struct{ n *Node }

func (b brokerBackend) Send(ctx context.Context, msgs []message.Message) ([]store.PutResult, error) {
	res, err := b.n.Send(ctx, msgs)
	return res, brokerError(err)
}

func (b brokerBackend) CommitOffsets(ctx context.Context, commits []store.OffsetCommit) error {
	return brokerError(b.n.CommitOffsets(ctx, commits))
}

func (b brokerBackend) CreateTopic(ctx context.Context, t store.TopicConfig) error {
	return brokerError(b.n.CreateTopic(ctx, t))
}

// brokerError maps the node's errors to the broker's: not the leader (or
// none known) to ErrNotLeader, a refusal before proposing to ErrBusy.
func brokerError(err error) error {
	switch {
	case errors.Is(err, transport.ErrNotLeader), errors.Is(err, transport.ErrNoLeader):
		return fmt.Errorf("%w: %w", broker.ErrNotLeader, err)
	case errors.Is(err, transport.ErrOverloaded), errors.Is(err, transport.ErrDiskFull):
		return fmt.Errorf("%w: %w", broker.ErrBusy, err)
	}
	return err
}

func (b brokerBackend) Reader() store.Reader { return b.n.Reader() }

func (b brokerBackend) IsLeader() bool { return b.n.raft.State() == raft.Leader }

func (b brokerBackend) Brokers(ctx context.Context) (broker.Brokers, error) {
	return b.n.brokerAddrs.lookup(ctx, b.n)
}

// brokerAddrs caches the members' broker addresses, asked from each
// member's Status RPC through the peers' connection pool.
type brokerAddrs struct {
	mu    sync.Mutex
	addrs map[string]string    // by member id
	at    map[string]time.Time // when addrs[id] was learnt
}

// lookup is the cluster's broker addresses: the leader's (brokerId 0) and
// the other members', sorted by member id; members whose address is not
// fresh are asked now, in parallel, each within brokerAskTimeout. A member
// that does not answer (or serves no broker) is left out.
func (c *brokerAddrs) lookup(ctx context.Context, n *Node) (broker.Brokers, error) {
	_, leaderID := n.raft.LeaderWithID()
	if leaderID == "" {
		return broker.Brokers{}, fmt.Errorf("no leader elected")
	}
	members := n.fsm.Members()
	ids := make([]string, 0, len(members))
	for id := range members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	c.refresh(ctx, n, members)
	c.mu.Lock()
	defer c.mu.Unlock()
	var out broker.Brokers
	for _, id := range ids {
		addr := c.addrs[id]
		if id == n.cfg.ID {
			addr = n.RemotingAddr()
		}
		switch {
		case addr == "":
		case id == string(leaderID):
			out.Leader = addr
		default:
			out.Followers = append(out.Followers, addr)
		}
	}
	return out, nil
}

// refresh asks every other member whose address is older than
// brokerAddrTTL for its Status.
func (c *brokerAddrs) refresh(ctx context.Context, n *Node, members map[string]string) {
	ctx, cancel := context.WithTimeout(ctx, brokerAskTimeout)
	defer cancel()
	now := time.Now()
	fresh := func(id string) bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return now.Sub(c.at[id]) < brokerAddrTTL
	}
	n.peers.askStatus(ctx, n.cfg.ID, members, fresh, func(id string, resp *pb.StatusResponse) {
		c.mu.Lock()
		c.addrs[id], c.at[id] = resp.GetRemotingAddr(), time.Now()
		c.mu.Unlock()
	})
}
