package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/raftmq/raftmq/auth"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/quota"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/store"
)

// Backend is what the broker needs of a node.
type Backend interface {
	// Send stores msgs through Raft. A member that is not the leader
	// returns an error wrapping ErrNotLeader, before proposing anything.
	Send(ctx context.Context, msgs []message.Message) ([]store.PutResult, error)
	// Reader serves reads from the local store.
	Reader() store.Reader
	// Brokers is where the cluster's members serve the broker protocol.
	Brokers(ctx context.Context) (Brokers, error)
	// IsLeader reports whether this member is the Raft leader now.
	IsLeader() bool
	// CommitOffsets and CreateTopic replicate through Raft; a member that
	// is not the leader returns an error wrapping ErrNotLeader.
	CommitOffsets(ctx context.Context, commits []store.OffsetCommit) error
	CreateTopic(ctx context.Context, t store.TopicConfig) error
}

// Brokers is the cluster as RocketMQ clients see it: the leader's broker
// address ("" while no leader is known, or its remoting is off) and the
// other members' (those that serve it), in the order of their member ids.
type Brokers struct {
	Leader    string
	Followers []string
}

// Errors a Backend wraps to be answered with their RocketMQ codes.
var (
	// ErrNotLeader: the send must go to the leader; nothing was proposed.
	ErrNotLeader = errors.New("broker: not the leader")
	// ErrBusy: the node refused the send before proposing it (queue full,
	// disk above its watermark): SYSTEM_BUSY.
	ErrBusy = errors.New("broker: busy")
)

// Options of a Broker. Zero values take the defaults given.
type Options struct {
	ClusterName  string // "raftmq"
	BrokerName   string // "raftmq"
	DefaultTopic string // "TBW102", RocketMQ's auto-create key
	// AutoCreateTopics and DefaultQueues are the store's: the default
	// topic is routed only while topics are created on first use.
	AutoCreateTopics bool
	DefaultQueues    int32
	// Produce paces each client's sends (nil: no rate). A client is the
	// principal ("user:NAME") with Auth, else the peer's IP ("ip:ADDR"),
	// as on the gRPC API: a node shares one limiter between both. A send
	// over its client's quota is answered SYSTEM_BUSY; a relayed one was
	// paced by the member that relayed it.
	Produce *quota.Limiter
	// RelayTimeout bounds a request relayed to the leader (default 10 s).
	RelayTimeout time.Duration
	Logger       hclog.Logger
	// Now is the clock of consumer expiry (time.Now).
	Now func() time.Time
	// Auth, when set, turns RocketMQ's ACL on: every request on the broker
	// address must carry an AccessKey and Signature that Auth accepts, and
	// its principal must hold the roles its code needs (see the package
	// documentation); a request relayed by another member carries the node
	// token instead. nil serves everyone, as before.
	Auth *auth.Authenticator
	// RelayTLS, when set, is the config requests are relayed to the
	// leader's broker address with (the leader's remoting port serves
	// TLS); nil relays in plaintext.
	RelayTLS *tls.Config
}

func (o Options) withDefaults() Options {
	if o.ClusterName == "" {
		o.ClusterName = "raftmq"
	}
	if o.BrokerName == "" {
		o.BrokerName = "raftmq"
	}
	if o.DefaultTopic == "" {
		o.DefaultTopic = "TBW102"
	}
	if o.RelayTimeout <= 0 {
		o.RelayTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Stats are the broker's counters since it started.
type Stats struct {
	Requests    uint64 // requests served, every code
	Sends       uint64 // sends stored here (a batch counts once)
	Relayed     uint64 // requests relayed to the leader (sends, offset updates, send-backs, routes)
	Failed      uint64 // answers with an error code (not SUCCESS, PULL_NOT_FOUND, PULL_RETRY_IMMEDIATELY or QUERY_NOT_FOUND)
	Unsupported uint64 // requests with a code not served
	Pulls       uint64 // pulls answered
	// Denied counts the requests the ACL refused with NO_PERMISSION
	// (also counted in Failed); Unauthenticated those of them whose
	// credential was missing, unknown, wrong, expired or revoked.
	Denied          uint64
	Unauthenticated uint64
	// Limited counts sends refused by Options.Produce (SYSTEM_BUSY).
	Limited uint64
	// Retried and DeadLettered count the messages consumers sent back
	// (CONSUMER_SEND_MSG_BACK) that this node stored in a %RETRY% topic
	// and in a %DLQ% topic.
	Retried, DeadLettered uint64
}

// Broker answers the broker protocol (Serve) and the name-server protocol
// (NameServer) for one node. Close closes its connections to the leader.
type Broker struct {
	backend Backend
	o       Options
	relays  relayPool
	groups  *groups
	stats   struct {
		requests, sends, relayed, failed, unsupported, pulls, denied, unauthenticated, limited atomic.Uint64
		retried, deadLettered                                                                  atomic.Uint64
	}
}

// New returns a broker serving backend.
func New(backend Backend, o Options) *Broker {
	o = o.withDefaults()
	if o.Auth != nil && o.Auth.NodeToken() == "" {
		o.Logger.Warn("RocketMQ ACL is on but the auth file sets no node_token: the leader will refuse the requests this member relays to it")
	}
	return &Broker{backend: backend, o: o, relays: relayPool{tls: o.RelayTLS, clients: map[string]*remoting.Client{}},
		groups: newGroups(o.Now)}
}

// Serve answers one request on the broker address (remoting.Handler). With
// Options.Auth set, the request is authenticated and authorized first.
func (b *Broker) Serve(ctx context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	b.stats.requests.Add(1)
	p, refusal := b.admit(conn, req)
	resp := refusal
	if resp == nil {
		resp = b.serve(ctx, conn, req, p)
	}
	b.count(resp)
	return resp
}

// serve dispatches a request admitted for p (nil without ACL).
func (b *Broker) serve(ctx context.Context, conn *remoting.Conn, req *remoting.Command, p *auth.Principal) *remoting.Command {
	switch req.Code {
	case remoting.CodeSendMessage, remoting.CodeSendMessageV2, remoting.CodeSendBatchMessage:
		if busy := b.pace(ctx, conn, req, p); busy != nil {
			return busy
		}
		return b.send(ctx, conn, req)
	case remoting.CodeGetRouteInfoByTopic:
		return b.route(ctx, req)
	case remoting.CodeGetMaxOffset, remoting.CodeGetMinOffset, remoting.CodeSearchOffsetByTime:
		return b.queueOffset(req)
	case remoting.CodePullMessage:
		return b.pull(ctx, req)
	case remoting.CodeQueryConsumerOffset:
		return b.queryConsumerOffset(req)
	case remoting.CodeUpdateConsumerOffset:
		return b.updateConsumerOffset(ctx, req)
	case remoting.CodeHeartbeat:
		return b.heartbeat(ctx, conn, req)
	case remoting.CodeUnregisterClient:
		return b.unregister(req)
	case remoting.CodeGetConsumerListByGroup:
		return b.consumerList(req)
	case remoting.CodeConsumerSendMsgBack:
		return b.sendBack(ctx, req, p)
	}
	return req.NotSupported()
}

// NameServer is the handler of the name-server address: routes only, to
// anyone (RocketMQ's name server checks no ACL either: a route names
// addresses, and every request to them is checked).
func (b *Broker) NameServer() remoting.Handler {
	return remoting.HandlerFunc(func(ctx context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		b.stats.requests.Add(1)
		var resp *remoting.Command
		if req.Code == remoting.CodeGetRouteInfoByTopic {
			resp = b.route(ctx, req)
		} else {
			resp = req.NotSupported()
		}
		b.count(resp)
		return resp
	})
}

func (b *Broker) count(resp *remoting.Command) {
	switch {
	case resp == nil || resp.Code == remoting.CodeSuccess:
	case resp.Code == remoting.CodePullNotFound || resp.Code == remoting.CodePullRetryImmediately || resp.Code == remoting.CodeQueryNotFound:
		// answers, not failures: nothing new, filtered out, nothing committed
	case resp.Code == remoting.CodeRequestNotSupported:
		b.stats.unsupported.Add(1)
	default:
		b.stats.failed.Add(1)
	}
}

// Stats returns the counters.
func (b *Broker) Stats() Stats {
	return Stats{Requests: b.stats.requests.Load(), Sends: b.stats.sends.Load(), Relayed: b.stats.relayed.Load(),
		Failed: b.stats.failed.Load(), Unsupported: b.stats.unsupported.Load(), Pulls: b.stats.pulls.Load(),
		Denied: b.stats.denied.Load(), Unauthenticated: b.stats.unauthenticated.Load(), Limited: b.stats.limited.Load(),
		Retried: b.stats.retried.Load(), DeadLettered: b.stats.deadLettered.Load()}
}

// Close stops watching consumer connections and closes the connections the
// broker opened to relay requests.
func (b *Broker) Close() error {
	b.groups.close()
	return b.relays.close()
}

// bornHost is a client's address as a record's born host (IPv4 only; an
// IPv6 client leaves zeros, as RocketMQ's v4 record layout has no room).
func bornHost(addr net.Addr) message.HostPort {
	var hp message.HostPort
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return hp
	}
	if ip := tcp.IP.To4(); ip != nil {
		copy(hp.IP[:], ip)
	}
	hp.Port = int32(tcp.Port)
	return hp
}

// relayPool keeps one connection per leader address for relayed requests,
// dialled over TLS with tls when set.
type relayPool struct {
	tls     *tls.Config
	mu      sync.Mutex
	closed  bool
	clients map[string]*remoting.Client
}

var errRelayClosed = errors.New("broker: closed")

func (p *relayPool) get(ctx context.Context, addr string) (*remoting.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errRelayClosed
	}
	if c, ok := p.clients[addr]; ok {
		return c, nil
	}
	c, err := remoting.DialTLS(ctx, addr, p.tls)
	if err != nil {
		return nil, err
	}
	p.clients[addr] = c
	return c, nil
}

// drop closes c if it is still the connection to addr.
func (p *relayPool) drop(addr string, c *remoting.Client) {
	p.mu.Lock()
	if p.clients[addr] == c {
		delete(p.clients, addr)
	} else {
		c = nil
	}
	p.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

func (p *relayPool) close() error {
	p.mu.Lock()
	clients := p.clients
	p.clients, p.closed = map[string]*remoting.Client{}, true
	p.mu.Unlock()
	var errs []error
	for _, c := range clients {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
