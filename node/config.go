package node

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/raftmq/raftmq/meta"
	"github.com/raftmq/raftmq/quota"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/tlsconf"
	"github.com/raftmq/raftmq/vfs"
)

// ErrConfig is wrapped by every Validate error.
var ErrConfig = errors.New("node: invalid config")

// Peer is one member of a static --peers list.
type Peer struct {
	ID       string
	RaftAddr string
}

// PeerList parses and prints "id=raftaddr,id=raftaddr".
type PeerList []Peer

// UnmarshalText parses "n1=127.0.0.1:7001,n2=127.0.0.1:7002".
func (p *PeerList) UnmarshalText(b []byte) error {
	*p = nil
	for _, item := range strings.Split(string(b), ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		id, addr, ok := strings.Cut(item, "=")
		if !ok || id == "" || addr == "" {
			return fmt.Errorf("%w: peer %q is not id=raftaddr", ErrConfig, item)
		}
		*p = append(*p, Peer{ID: strings.TrimSpace(id), RaftAddr: strings.TrimSpace(addr)})
	}
	return nil
}

// String prints the list in the form UnmarshalText reads.
func (p PeerList) String() string {
	s := make([]string, len(p))
	for i, x := range p {
		s[i] = x.ID + "=" + x.RaftAddr
	}
	return strings.Join(s, ",")
}

// RaftConfig is the Raft tuning (the [raft] table of the node config; see README.md).
type RaftConfig struct {
	HeartbeatTimeout   time.Duration `toml:"heartbeat_timeout"`
	HeartbeatInterval  time.Duration `toml:"heartbeat_interval"`
	ElectionTimeout    time.Duration `toml:"election_timeout"`
	LeaderLeaseTimeout time.Duration `toml:"leader_lease_timeout"`
	CommitTimeout      time.Duration `toml:"commit_timeout"`
	MaxAppendEntries   int           `toml:"max_append_entries"`
	BatchApplyCh       bool          `toml:"batch_apply_ch"`
	TrailingLogs       uint64        `toml:"trailing_logs"`
	SnapshotInterval   time.Duration `toml:"snapshot_interval"`
	SnapshotThreshold  uint64        `toml:"snapshot_threshold"`
	SnapshotRetain     int           `toml:"snapshot_retain"`
	PreVoteDisabled    bool          `toml:"pre_vote_disabled"`
	TransportTimeout   time.Duration `toml:"transport_timeout"`
	MaxPool            int           `toml:"max_pool"`
	// SnapshotBytes takes a snapshot once this many bytes of Raft log were
	// applied since the last one (0: off), besides SnapshotThreshold and
	// SnapshotInterval: a local snapshot costs O(metadata), and it bounds
	// what a restart after kill -9 reads back from the Raft log.
	SnapshotBytes int64 `toml:"snapshot_bytes"`
	// TrailingBytes caps the log kept behind a snapshot by size as well as
	// by TrailingLogs: before a size-triggered snapshot the kept entries
	// are set to TrailingBytes over the mean entry size (0: count only).
	TrailingBytes int64 `toml:"trailing_bytes"`
	// MaxRPCsInFlight bounds the AppendEntries RPCs sent to one follower and
	// not yet answered when Raft replicates in pipeline mode (RaftTransport).
	// 1 turns pipelining off: one AppendEntries at a time per follower.
	// Default 2 (as hashicorp/raft's): the next batch is sent while the
	// follower fsyncs the previous one, and entries that arrive meanwhile
	// still batch into the one after (hashicorp/raft PR #541).
	MaxRPCsInFlight int `toml:"max_rpcs_in_flight"`
	// ReplicateWhileStoring sends new entries to the followers while the
	// leader writes them to its own log (default true), instead of after
	// that write: a commit then waits for the slower of the two writes, not
	// their sum. The leader still counts itself toward a quorum only once
	// its own write returned.
	ReplicateWhileStoring bool `toml:"replicate_while_storing"`
	// LogStore is the Raft log store: "auto" (default: what the data dir
	// holds, raft-wal for a new one), "wal" or "boltdb"; see OpenRaftStore.
	LogStore string `toml:"log_store"`
}

// GroupCommit bounds how the leader packs concurrent Sends into one entry,
// and how many Sends may wait for one (backpressure).
type GroupCommit struct {
	MaxBytes    int           `toml:"max_bytes"`    // of one entry
	MaxMessages int           `toml:"max_messages"` // of one entry
	MaxDelay    time.Duration `toml:"max_delay"`    // 0: take only what is already queued
	// MaxInFlight bounds entries proposed but not yet applied; Sends that
	// arrive meanwhile wait and are packed into the next entry (adaptive
	// batching, see node/batcher.go). Under load entries carry about
	// (Sends outstanding) / MaxInFlight messages. The default 2 keeps one
	// entry replicating while the next is written to the leader's log:
	// hashicorp/raft replicates with one AppendEntries in flight per
	// follower, so more entries in Raft only make each smaller.
	MaxInFlight int `toml:"max_in_flight"`
	// MaxQueueMessages and MaxQueueBytes bound the Sends waiting for an
	// entry (at least one entry's worth each). A Send that does not fit
	// waits up to QueueWait (and within its deadline) for room, then fails
	// with RESOURCE_EXHAUSTED, nothing stored (0: fail at once).
	MaxQueueMessages int           `toml:"max_queue_messages"`
	MaxQueueBytes    int           `toml:"max_queue_bytes"`
	QueueWait        time.Duration `toml:"queue_wait"`
}

// Limits are the per-client quotas (the [limits] table; 0 turns one off).
// A client is a principal with --auth-file, else a peer IP address. A send
// over its client's produce rate is held until the rate allows it, up to a
// second; one that would wait longer is refused with RESOURCE_EXHAUSTED
// after a second (so that a client resending at once cannot spin).
// Dedup are the idempotent producers' settings. They are replicated state:
// the leader proposes them when they differ from what the cluster applies,
// so the leader's config decides (give every node the same).
type Dedup struct {
	// Window is the sequences the cluster keeps per producer: a send
	// whose sequence is that far behind its producer's newest is refused
	// as too old. Clients keep fewer outstanding (client.Options.IdempotenceWindow).
	Window int `toml:"window"`
	// ProducerExpiry: a producer with no message stored for this long is
	// forgotten (its next message starts a new window).
	ProducerExpiry time.Duration `toml:"producer_expiry"`
}

// config is d as the store's replicated settings.
func (d Dedup) config() meta.DedupConfig {
	return meta.DedupConfig{Window: d.Window, Expiry: d.ProducerExpiry.Milliseconds()}
}

type Limits struct {
	ProduceMessagesPerSecond float64 `toml:"produce_messages_per_second"`
	ProduceBytesPerSecond    float64 `toml:"produce_bytes_per_second"`
	LongPollsPerConnection   int     `toml:"long_polls_per_connection"`
	MaxTopics                int     `toml:"max_topics"`
	// MaxRequestBytes bounds one gRPC request (default 64 MiB).
	MaxRequestBytes int `toml:"max_request_bytes"`
}

// Config of one node. DefaultConfig fills every field; cmd/node loads it
// with Load (defaults → file → env → flags).
type Config struct {
	ID       string `toml:"id"`
	Dir      string `toml:"dir"`
	RaftAddr string `toml:"raft_addr"`
	APIAddr  string `toml:"api_addr"`
	HTTPAddr string `toml:"http_addr"`
	// RemotingAddr serves RocketMQ's broker protocol and NamesrvAddr its
	// name-server protocol (package broker); "" turns one off.
	RemotingAddr string   `toml:"remoting_addr"`
	NamesrvAddr  string   `toml:"namesrv_addr"`
	Bootstrap    bool     `toml:"bootstrap"`
	Peers        PeerList `toml:"peers"`
	Join         string   `toml:"join"` // API address of any member
	LogLevel     string   `toml:"log_level"`

	// TLSCert, TLSKey and TLSCA turn on TLS on every listener (API, HTTP,
	// remoting) and mutual TLS on the Raft port and between nodes; all
	// three or none. SIGHUP reloads them.
	TLSCert string `toml:"tls_cert"`
	TLSKey  string `toml:"tls_key"`
	TLSCA   string `toml:"tls_ca"`
	// AuthFile turns on authentication and ACLs (package auth describes
	// the file); SIGHUP reloads it.
	AuthFile string `toml:"auth_file"`
	Limits   Limits `toml:"limits"`
	Dedup    Dedup  `toml:"dedup"`

	Store       store.Config `toml:"store"` // Dir defaults to <Dir>/store
	Raft        RaftConfig   `toml:"raft"`
	GroupCommit GroupCommit  `toml:"group_commit"`

	ApplyTimeout   time.Duration `toml:"apply_timeout"`    // bound of a write that has no ctx deadline
	CatchUpTimeout time.Duration `toml:"catch_up_timeout"` // non-voter → voter promotion wait
	ShutdownGrace  time.Duration `toml:"shutdown_grace"`   // leadership transfer + server drain

	FS     vfs.FS       `toml:"-"` // default vfs.OS()
	Logger hclog.Logger `toml:"-"` // default: hclog to stderr at LogLevel
	// Clock is the scheduler's clock: when delayed messages are due and
	// the time a DeliverDue entry carries (default time.Now).
	Clock func() time.Time `toml:"-"`
}

// DefaultConfig is a single node in ./data on the default ports.
func DefaultConfig() Config {
	return Config{
		ID:       "n1",
		Dir:      "./data",
		RaftAddr: "127.0.0.1:7001",
		APIAddr:  "127.0.0.1:9001",
		HTTPAddr: "127.0.0.1:8001",
		// RocketMQ's own defaults (broker 10911, name server 9876).
		RemotingAddr: "127.0.0.1:10911",
		NamesrvAddr:  "127.0.0.1:9876",
		LogLevel:     "info",
		Store:        store.DefaultConfig(""),
		Raft: RaftConfig{
			// A follower calls an election 0.75-1.5 s after it last heard
			// from the leader: kill -9 of the leader to the next
			// acknowledged write took a median of 1.43 s and at most 2.55 s
			// over 20 kills (TestFailover, RAFTMQ_FAILOVER_HEARTBEAT=shipped),
			// against 2.06 s and 3.00 s with hashicorp/raft's 1 s.
			HeartbeatTimeout: 750 * time.Millisecond,
			// The leader heartbeats each follower every 25-50 ms
			// (hashicorp/raft: HeartbeatTimeout/10, 75-150 ms here): a
			// follower restarted after kill -9 serves once it hears from
			// the leader, and that wait was most of its restart.
			HeartbeatInterval:     25 * time.Millisecond,
			ElectionTimeout:       750 * time.Millisecond,
			LeaderLeaseTimeout:    375 * time.Millisecond,
			CommitTimeout:         20 * time.Millisecond,
			MaxAppendEntries:      512,
			BatchApplyCh:          true,
			TrailingLogs:          10240,
			SnapshotInterval:      120 * time.Second,
			SnapshotThreshold:     8192,
			SnapshotRetain:        2,
			SnapshotBytes:         256 << 20,
			TrailingBytes:         256 << 20,
			TransportTimeout:      10 * time.Second,
			MaxPool:               3,
			MaxRPCsInFlight:       2,
			ReplicateWhileStoring: true,
			LogStore:              LogStoreAuto,
		},
		GroupCommit: GroupCommit{MaxBytes: 1 << 20, MaxMessages: 1024, MaxDelay: 0, MaxInFlight: 2,
			MaxQueueMessages: 4096, MaxQueueBytes: 16 << 20, QueueWait: 500 * time.Millisecond},
		Dedup:          Dedup{Window: meta.DefaultDedupWindow, ProducerExpiry: time.Duration(meta.DefaultProducerExpiry) * time.Millisecond},
		ApplyTimeout:   10 * time.Second,
		CatchUpTimeout: 60 * time.Second,
		ShutdownGrace:  5 * time.Second,
	}
}

// storeConfig is the store config with its directory filled in.
func (c *Config) storeConfig() store.Config {
	sc := c.Store
	if sc.Dir == "" {
		sc.Dir = filepath.Join(c.Dir, "store")
	}
	return sc
}

// Validate reports the first problem with c in words a user can act on.
func (c *Config) Validate() error {
	for _, check := range []func() error{c.validateIdentity, c.validateMembership, c.validateRaft, c.validateGroupCommit, c.validateSecurity, c.validateDedup} {
		if err := check(); err != nil {
			return err
		}
	}
	sc := c.storeConfig()
	if err := sc.Validate(); err != nil {
		return fmt.Errorf("%w: [store] %w", ErrConfig, err)
	}
	return nil
}

func bad(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
}

func (c *Config) validateIdentity() error {
	if c.ID == "" || strings.ContainsAny(c.ID, "=, \t") {
		return bad("id %q must be non-empty without '=', ',' or spaces", c.ID)
	}
	if c.Dir == "" {
		return bad("dir must be set")
	}
	for name, addr := range map[string]string{"raft-addr": c.RaftAddr, "api-addr": c.APIAddr, "http-addr": c.HTTPAddr} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return bad("%s %q is not host:port: %v", name, addr, err)
		}
	}
	for name, addr := range map[string]string{"remoting-addr": c.RemotingAddr, "namesrv-addr": c.NamesrvAddr} {
		if _, _, err := net.SplitHostPort(addr); addr != "" && err != nil {
			return bad("%s %q is not host:port (or \"\" to turn it off): %v", name, addr, err)
		}
	}
	if host, _, _ := net.SplitHostPort(c.RaftAddr); host == "" || net.ParseIP(host).IsUnspecified() {
		return bad("raft-addr %q must name an address peers can dial, not an unspecified host", c.RaftAddr)
	}
	return nil
}

func (c *Config) validateMembership() error {
	if c.Join != "" && c.Bootstrap {
		return bad("--join and --bootstrap exclude each other: bootstrap forms a new cluster, join enters one")
	}
	seen := map[string]bool{}
	self := false
	for _, p := range c.Peers {
		if seen[p.ID] {
			return bad("peer id %q listed twice", p.ID)
		}
		seen[p.ID] = true
		if _, _, err := net.SplitHostPort(p.RaftAddr); err != nil {
			return bad("peer %s address %q is not host:port", p.ID, p.RaftAddr)
		}
		if p.ID == c.ID {
			self = true
		}
	}
	if c.Bootstrap && len(c.Peers) > 0 && !self {
		return bad("--peers must include this node's id %q when bootstrapping", c.ID)
	}
	return nil
}

func (c *Config) validateRaft() error {
	r := c.Raft
	switch {
	case r.HeartbeatTimeout < 5*time.Millisecond:
		return bad("raft heartbeat_timeout %v < 5ms", r.HeartbeatTimeout)
	case r.HeartbeatInterval < 0 || r.HeartbeatInterval >= r.HeartbeatTimeout:
		return bad("raft heartbeat_interval %v must be from 0 (heartbeat_timeout/10) to below heartbeat_timeout %v", r.HeartbeatInterval, r.HeartbeatTimeout)
	case r.ElectionTimeout < r.HeartbeatTimeout:
		return bad("raft election_timeout %v < heartbeat_timeout %v", r.ElectionTimeout, r.HeartbeatTimeout)
	case r.LeaderLeaseTimeout <= 0 || r.LeaderLeaseTimeout > r.HeartbeatTimeout:
		return bad("raft leader_lease_timeout %v must be in (0, heartbeat_timeout]", r.LeaderLeaseTimeout)
	case r.CommitTimeout < time.Millisecond:
		return bad("raft commit_timeout %v < 1ms", r.CommitTimeout)
	case r.MaxAppendEntries <= 0 || r.MaxAppendEntries > 1024:
		return bad("raft max_append_entries %d must be in 1..1024", r.MaxAppendEntries)
	case r.SnapshotRetain < 1:
		return bad("raft snapshot_retain %d < 1", r.SnapshotRetain)
	case r.SnapshotBytes < 0 || r.TrailingBytes < 0:
		return bad("raft snapshot_bytes %d and trailing_bytes %d must be >= 0", r.SnapshotBytes, r.TrailingBytes)
	case r.SnapshotInterval < 5*time.Millisecond:
		return bad("raft snapshot_interval %v < 5ms", r.SnapshotInterval)
	case r.TransportTimeout <= 0:
		return bad("raft transport_timeout must be > 0")
	case r.MaxRPCsInFlight < 1 || r.MaxRPCsInFlight > 64:
		return bad("raft max_rpcs_in_flight %d must be in 1..64 (1 turns pipelining off)", r.MaxRPCsInFlight)
	case r.LogStore != "" && r.LogStore != LogStoreAuto && r.LogStore != LogStoreBolt && r.LogStore != LogStoreWAL:
		return bad("raft log_store %q is none of %q, %q, %q", r.LogStore, LogStoreAuto, LogStoreWAL, LogStoreBolt)
	}
	return nil
}

func (c *Config) validateDedup() error {
	if c.Dedup.ProducerExpiry%time.Millisecond != 0 || c.Dedup.config().Validate() != nil {
		return bad("dedup window %d must be in 1..%d and producer_expiry %v at least 1s, in whole milliseconds",
			c.Dedup.Window, 1<<20, c.Dedup.ProducerExpiry)
	}
	return nil
}

func (c *Config) validateGroupCommit() error {
	g := c.GroupCommit
	switch {
	case g.MaxBytes <= 0:
		return bad("group_commit max_bytes %d must be > 0", g.MaxBytes)
	case g.MaxMessages <= 0 || g.MaxMessages > 1<<16:
		return bad("group_commit max_messages %d must be in 1..65536", g.MaxMessages)
	case g.MaxDelay < 0:
		return bad("group_commit max_delay %v < 0", g.MaxDelay)
	case g.MaxInFlight < 0 || g.MaxInFlight > 64:
		return bad("group_commit max_in_flight %d must be in 0..64 (0 means 1)", g.MaxInFlight)
	case g.MaxQueueMessages < g.MaxMessages:
		return bad("group_commit max_queue_messages %d < max_messages %d: the queue must hold one entry", g.MaxQueueMessages, g.MaxMessages)
	case g.MaxQueueBytes < g.MaxBytes:
		return bad("group_commit max_queue_bytes %d < max_bytes %d: the queue must hold one entry", g.MaxQueueBytes, g.MaxBytes)
	case g.QueueWait < 0:
		return bad("group_commit queue_wait %v < 0", g.QueueWait)
	case c.ApplyTimeout <= 0:
		return bad("apply_timeout must be > 0")
	case c.CatchUpTimeout <= 0:
		return bad("catch_up_timeout must be > 0")
	}
	return nil
}

func (c *Config) validateSecurity() error {
	if err := c.tlsFiles().Check(); err != nil {
		return bad("%v", err)
	}
	l := c.Limits
	if l.ProduceMessagesPerSecond < 0 || l.ProduceBytesPerSecond < 0 || l.LongPollsPerConnection < 0 || l.MaxTopics < 0 || l.MaxRequestBytes < 0 {
		return bad("[limits] values must not be negative")
	}
	if l.MaxRequestBytes != 0 && l.MaxRequestBytes < 64<<10 {
		return bad("[limits] max_request_bytes %d is below 64 KiB", l.MaxRequestBytes)
	}
	return nil
}

// produceLimiter is the produce quota shared by the gRPC API and the
// RocketMQ broker: nil without a rate, unless users may carry their own
// (an auth file).
func (c *Config) produceLimiter() *quota.Limiter {
	l := c.Limits
	return quota.New(quota.Config{MessagesPerSecond: l.ProduceMessagesPerSecond, BytesPerSecond: l.ProduceBytesPerSecond,
		RefusalDelay: time.Second, PerClient: c.AuthFile != ""}, nil)
}

func (c *Config) tlsFiles() tlsconf.Files {
	return tlsconf.Files{Cert: c.TLSCert, Key: c.TLSKey, CA: c.TLSCA}
}
