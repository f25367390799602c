package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/auth"
	"github.com/raftmq/raftmq/fsm"
	"github.com/raftmq/raftmq/membership"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/node/snapstore"
	"github.com/raftmq/raftmq/quota"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/transport"
	"github.com/raftmq/raftmq/vfs"
)

// Node is one cluster member: store, FSM, Raft, the gRPC API and HTTP.
type Node struct {
	cfg  Config
	log  hclog.Logger
	fs   vfs.FS           // cfg.FS metered by disk
	disk *vfs.Meter       // raftmq_disk_write_bytes_total (metrics.go)
	host message.HostPort // store host written into records this node leads

	fsm  *fsm.FSM
	raft *raft.Raft
	bolt RaftStore // raft-boltdb by default (Raft.LogStore)
	sec  security  // TLS material and auth policy (security.go)
	// produceQuota paces each client's sends on the API and the broker.
	produceQuota *quota.Limiter
	trans        *RaftTransport
	snaps        *snapstore.Store

	batcher *batcher
	peers   *peerDisks // the leader's view of its peers' disks
	// spaceWait (buffered 1) is signalled by the FSM on each try of an
	// entry a full disk refused: handOverLoop gives leadership away.
	spaceWait chan struct{}
	// diskUsed is the store disk's used percent as read at diskReadAt
	// (unix ns): see diskUsedPercent.
	diskUsed, diskReadAt atomic.Int64
	metrics              *metrics
	api                  *transport.Server
	apiLis               net.Listener
	httpSrv              *http.Server
	httpLis              net.Listener
	remoting             remotingServers
	brokerAddrs          brokerAddrs
	groupMembers         *membership.Table[struct{}] // gRPC consumers, on the leader
	electedAlone         bool                        // electAlone shortened the heartbeat timeout (restored on leading)

	readyMu sync.Mutex
	ready   chan struct{} // closed while leader and the barrier passed
	isReady atomic.Bool

	stop      chan struct{}
	fatal     chan error
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// New opens the store (local recovery first), then Raft, and starts serving.
func New(cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, fs: cfg.FS, log: cfg.Logger, ready: make(chan struct{}),
		stop: make(chan struct{}), fatal: make(chan error, 1), peers: newPeerDisks(), spaceWait: make(chan struct{}, 1),
		brokerAddrs: brokerAddrs{addrs: map[string]string{}, at: map[string]time.Time{}}, groupMembers: newGroupMembers()}
	if n.fs == nil {
		n.fs = vfs.OS()
	}
	n.disk = newDiskMeter(cfg)
	n.fs = vfs.Metered(n.fs, n.disk)
	if n.log == nil {
		n.log = hclog.New(&hclog.LoggerOptions{Name: "raftmq", Level: hclog.LevelFromString(cfg.LogLevel)})
	}
	n.log = n.log.With("node", cfg.ID)
	n.host = hostPort(cfg.APIAddr)
	var err error
	if n.sec, err = openSecurity(cfg); err != nil {
		return nil, err
	}
	if cfg.AuthFile != "" && auth.ReadableByOthers(cfg.AuthFile) {
		n.log.Warn("the auth file can be read by other users: it holds the node token and RocketMQ secret keys", "file", cfg.AuthFile)
	}
	n.peers.dialOpts = n.sec.peerDialOptions()
	n.produceQuota = cfg.produceLimiter()
	if err := n.open(); err != nil {
		_ = n.Close()
		return nil, err
	}
	return n, nil
}

func (n *Node) open() error {
	sc := n.cfg.storeConfig()
	sc.Logger = n.log.Named("store")
	// A failed sync closes the store to writes; the node stops, and the
	// next start recovers from what is really on disk. A full disk does
	// not stop it: the FSM reopens the store when there is space again.
	sc.OnFailure = n.onStoreFailure
	if err := n.fs.MkdirAll(sc.Dir, 0o755); err != nil {
		return fmt.Errorf("node: %w", err)
	}
	st, err := store.Open(n.fs, sc)
	if err != nil {
		return fmt.Errorf("node: open store: %w", err)
	}
	n.fsm = fsm.New(st, fsm.Config{FS: n.fs, Store: sc, Logger: n.log.Named("fsm"), OnFatal: n.onFatal,
		SnapshotBytes: n.cfg.Raft.SnapshotBytes, Done: n.stop, OnSpaceWait: n.onSpaceWait})
	if err := n.openRaft(); err != nil {
		return err
	}
	n.metrics = newMetrics(n)
	n.batcher = newBatcher(n)
	return n.startServers()
}

// onStoreFailure stops the node when its store failed closed, except for a
// write refused for lack of space: the FSM then waits for space and reopens
// the store itself (fsm.Config.SpaceRetry); the README lists what the node
// cannot do meanwhile.
func (n *Node) onStoreFailure(err error) {
	if fsm.WaitsForSpace(err) {
		n.log.Warn("store disk full: writes stop until there is space", "error", err)
		return
	}
	n.onFatal(err)
}

// onSpaceWait is the FSM's OnSpaceWait: it must not block the FSM.
func (n *Node) onSpaceWait() {
	select {
	case n.spaceWait <- struct{}{}:
	default:
	}
}

// handOverLoop hands leadership to another voter while this node's FSM
// waits for disk space: a leader that cannot apply answers no send. The
// FSM signals on every try, so a node elected while it waits hands over
// again.
func (n *Node) handOverLoop() {
	for {
		select {
		case <-n.stop:
			return
		case <-n.spaceWait:
		}
		if n.raft.State() != raft.Leader || !n.fsm.Stats().WaitingForSpace {
			continue
		}
		if err := n.raft.LeadershipTransfer().Error(); err != nil {
			n.log.Warn("disk full: leadership transfer failed", "error", err)
			continue
		}
		n.log.Warn("disk full: leadership handed over while this node waits for space")
	}
}

func (n *Node) onFatal(err error) {
	select {
	case n.fatal <- err:
	default:
	}
}

func (n *Node) raftConfig() *raft.Config {
	rc := BuildRaftConfig(n.cfg, newPeerLogger(n.log.Named("raft")))
	// The store recovered itself up to its applied entry: Raft starts after
	// it instead of reading every entry since the last snapshot for the FSM
	// to skip (the member map those entries set is in the store's meta).
	rc.AppliedOnStart = func() (uint64, uint64) { return n.fsm.Store().Applied() }
	return rc
}

// BuildRaftConfig is the hashicorp/raft configuration a node with cfg runs. The
// bench's bare-raft ceiling builds its config here too, so the settings of
// the two cannot drift apart.
func BuildRaftConfig(cfg Config, logger hclog.Logger) *raft.Config {
	rc := raft.DefaultConfig()
	t := cfg.Raft
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.HeartbeatTimeout, rc.ElectionTimeout = t.HeartbeatTimeout, t.ElectionTimeout
	rc.HeartbeatInterval = t.HeartbeatInterval
	rc.LeaderLeaseTimeout, rc.CommitTimeout = t.LeaderLeaseTimeout, t.CommitTimeout
	rc.MaxAppendEntries, rc.BatchApplyCh = t.MaxAppendEntries, t.BatchApplyCh
	rc.TrailingLogs, rc.SnapshotInterval, rc.SnapshotThreshold = t.TrailingLogs, t.SnapshotInterval, t.SnapshotThreshold
	rc.PreVoteDisabled = t.PreVoteDisabled
	rc.ReplicateWhileStoring = t.ReplicateWhileStoring
	rc.NoSnapshotRestoreOnStart = true // the store recovered itself; Raft replays after it
	rc.NoLegacyTelemetry = true
	rc.Logger = logger
	return rc
}

func (n *Node) openRaft() error {
	dir := filepath.Join(n.cfg.Dir, "raft")
	if err := n.fs.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("node: %w", err)
	}
	kind := ResolveLogStore(n.cfg.Raft.LogStore, dir)
	var err error
	if n.bolt, err = OpenRaftStore(kind, dir, n.log.Named("raft-log")); err != nil {
		return err
	}
	n.log.Info("raft log store", "kind", kind, "configured", n.cfg.Raft.LogStore)
	// Under the data dir, like the store by default: local snapshots hard-link
	// the store's segments, which needs one file system (else they are copied).
	n.snaps, err = snapstore.New(filepath.Join(dir, "snapshots"), n.cfg.Raft.SnapshotRetain,
		snapstore.Options{FS: n.fs, Logger: n.log.Named("snapshots")})
	if err != nil {
		return fmt.Errorf("node: snapshot store: %w", err)
	}
	if err := n.restoreIfBehind(); err != nil {
		return err
	}
	n.seedMembers()
	serverTLS, clientTLS := n.sec.raftTLS()
	n.trans, err = NewRaftTransportTLS(n.cfg, newPeerLogger(n.log.Named("raft-net")), serverTLS, clientTLS)
	if err != nil {
		return fmt.Errorf("node: raft transport on %s: %w", n.cfg.RaftAddr, err)
	}
	hasState, err := raft.HasExistingState(n.bolt, n.bolt, n.snaps)
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	n.raft, err = raft.NewRaft(n.raftConfig(), n.fsm, CachedLogs(n.bolt), n.bolt, n.snaps, n.trans)
	if err != nil {
		return fmt.Errorf("node: start raft: %w", err)
	}
	if !hasState {
		if err := n.bootstrap(); err != nil {
			return err
		}
	}
	n.electedAlone = n.electAlone()
	return nil
}

// seedMembers loads the member map of the newest local snapshot: Raft does
// not replay the entries it covers (NoSnapshotRestoreOnStart).
func (n *Node) seedMembers() {
	metas, err := n.snaps.List()
	if err != nil || len(metas) == 0 {
		return
	}
	h, err := n.snaps.ReadHeader(metas[0].ID)
	if err != nil {
		n.log.Warn("cannot read newest snapshot for member addresses", "error", err)
		return
	}
	n.fsm.SeedMembers(h.Members)
}

// bootstrap forms a cluster on a node without Raft state: from --peers with
// --bootstrap, or alone when neither peers nor join are given.
func (n *Node) bootstrap() error {
	self := raft.Server{ID: raft.ServerID(n.cfg.ID), Address: n.trans.LocalAddr()}
	var servers []raft.Server
	switch {
	case n.cfg.Bootstrap && len(n.cfg.Peers) > 0:
		for _, p := range n.cfg.Peers {
			s := raft.Server{ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr)}
			if p.ID == n.cfg.ID {
				s = self
			}
			servers = append(servers, s)
		}
	case n.cfg.Bootstrap || (n.cfg.Join == "" && len(n.cfg.Peers) == 0):
		servers = []raft.Server{self}
	default:
		return nil // joins, or waits for the bootstrapping peer to contact it
	}
	n.log.Info("bootstrapping cluster", "servers", len(servers))
	err := n.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error()
	if err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return fmt.Errorf("node: bootstrap: %w", err)
	}
	return nil
}

func (n *Node) startServers() error {
	var err error
	if n.apiLis, err = net.Listen("tcp", n.cfg.APIAddr); err != nil {
		return fmt.Errorf("node: api listen: %w", err)
	}
	if n.httpLis, err = n.sec.listen(n.cfg.HTTPAddr); err != nil {
		return fmt.Errorf("node: http listen: %w", err)
	}
	if err := n.listenRemoting(); err != nil {
		return err
	}
	n.api = transport.NewServer(n, transport.ServerOptions{Logger: n.log, MaxMessageSize: n.cfg.storeConfig().MaxMessageSize,
		MaxRecvMsgSize: n.cfg.Limits.MaxRequestBytes, GRPC: append(n.metrics.grpcServerOptions(), n.sec.serverOptions()...),
		ForwardDialOptions: n.sec.peerDialOptions(), Auth: n.sec.auth,
		Quotas: transport.Quotas{Produce: n.produceQuota, LongPollsPerConnection: n.cfg.Limits.LongPollsPerConnection, MaxTopics: n.cfg.Limits.MaxTopics}})
	n.metrics.grpc.InitializeMetrics(n.api)
	n.httpSrv = &http.Server{Handler: n.httpHandler(), ReadHeaderTimeout: 5 * time.Second}
	n.goroutine(func() {
		if err := n.api.Serve(n.apiLis); err != nil {
			n.onFatal(fmt.Errorf("node: api server: %w", err))
		}
	})
	n.goroutine(func() {
		if err := n.httpSrv.Serve(n.httpLis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.onFatal(fmt.Errorf("node: http server: %w", err))
		}
	})
	n.serveRemoting()
	n.goroutine(n.leaderLoop)
	n.goroutine(func() { n.peers.run(n) })
	n.goroutine(n.handOverLoop)
	n.goroutine(n.snapshotBySize)
	n.goroutine(n.batcher.run)
	n.goroutine(n.scheduleLoop)
	if n.cfg.Join != "" {
		n.goroutine(n.joinLoop)
	} else {
		n.goroutine(n.announceLoop)
	}
	n.log.Info("serving", "raft", n.trans.LocalAddr(), "api", n.apiLis.Addr(), "http", n.httpLis.Addr(),
		"remoting", n.RemotingAddr(), "namesrv", n.NamesrvAddr())
	return nil
}

func (n *Node) goroutine(f func()) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f()
	}()
}

// RaftAddr, APIAddr and HTTPAddr are the bound addresses (useful with :0).
func (n *Node) RaftAddr() string { return string(n.trans.LocalAddr()) }

// APIAddr is the bound gRPC address.
func (n *Node) APIAddr() string { return n.apiLis.Addr().String() }

// HTTPAddr is the bound HTTP address.
func (n *Node) HTTPAddr() string { return n.httpLis.Addr().String() }

// Raft exposes the Raft instance (tests, admin).
func (n *Node) Raft() *raft.Raft { return n.raft }

// FSMStats returns the FSM's applied/skipped counters.
func (n *Node) FSMStats() fsm.Stats { return n.fsm.Stats() }

// Run serves until ctx ends or the node fails, then closes the node.
func (n *Node) Run(ctx context.Context) error {
	var err error
	select {
	case <-ctx.Done():
	case err = <-n.fatal:
		n.log.Error("node failed", "error", err)
	}
	return errors.Join(err, n.Close())
}

// Close stops the node gracefully: stop taking requests, hand leadership
// over, shut Raft down, then close the store (flush, checkpoint, abort file).
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.log.Info("shutting down")
		// First: a route request asks peers through n.peers' connections,
		// which the peers' loop closes once n.stop is closed.
		n.closeRemoting()
		close(n.stop)
		ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ShutdownGrace)
		defer cancel()
		if n.api != nil {
			n.api.Stop(ctx)
		}
		if n.httpSrv != nil {
			_ = n.httpSrv.Shutdown(ctx)
		}
		n.transferOnShutdown()
		n.snapshotOnShutdown()
		n.closeErr = n.closeResources()
		n.log.Info("stopped", "error", n.closeErr)
	})
	return n.closeErr
}

// snapshotOnShutdown takes a Raft snapshot before a graceful stop. A local
// snapshot costs O(metadata) (node/snapstore links segments); it lets Raft
// compact its log and start from it even when the store's applied entry
// cannot be used (AppliedOnStart: a log that lost its tail).
func (n *Node) snapshotOnShutdown() {
	if n.raft == nil {
		return
	}
	started := time.Now()
	err := n.raft.Snapshot().Error()
	switch {
	case errors.Is(err, raft.ErrNothingNewToSnapshot):
	case err != nil:
		n.log.Warn("snapshot on shutdown failed", "error", err)
	default:
		n.log.Info("snapshot on shutdown", "duration", time.Since(started))
	}
}

func (n *Node) transferOnShutdown() {
	if n.raft == nil || n.raft.State() != raft.Leader || n.numVoters() < 2 {
		return
	}
	if err := n.raft.LeadershipTransfer().Error(); err != nil {
		n.log.Warn("leadership transfer on shutdown failed", "error", err)
	}
}

// closeResources shuts Raft down and releases everything New opened; it is
// also the cleanup of a failed New.
func (n *Node) closeResources() error {
	var errs []error
	if n.raft != nil {
		shutdown := n.raft.Shutdown()
		// Close the transport before waiting: an RPC stalled on an
		// unreachable peer would otherwise hold Shutdown until it times out.
		if n.trans != nil {
			errs = append(errs, n.trans.Close())
		}
		errs = append(errs, shutdown.Error())
	}
	if n.apiLis != nil && n.api == nil {
		_ = n.apiLis.Close()
	}
	if n.httpLis != nil && n.httpSrv == nil {
		_ = n.httpLis.Close()
	}
	n.closeRemoting()
	n.wg.Wait()
	if n.trans != nil && n.raft == nil {
		errs = append(errs, n.trans.Close())
	}
	if n.bolt != nil {
		errs = append(errs, n.bolt.Close())
	}
	if n.fsm != nil {
		if err := n.fsm.Store().Close(); !errors.Is(err, store.ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (n *Node) numVoters() int {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return 0
	}
	v := 0
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			v++
		}
	}
	return v
}

// hostPort turns an "ip:port" into the 8-byte STOREHOST form (0.0.0.0 if
// the host is not an IPv4 literal).
func hostPort(addr string) message.HostPort {
	var hp message.HostPort
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return hp
	}
	if ip := net.ParseIP(host).To4(); ip != nil {
		copy(hp.IP[:], ip)
	}
	p, _ := strconv.Atoi(port)
	hp.Port = int32(p)
	return hp
}
