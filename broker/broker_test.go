package broker

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/vfs"
)

// storeBackend is a Backend over a real store on disk, appending each Send
// as one entry (the node would propose it through Raft first). leader
// false makes every Send fail with ErrNotLeader; sendErr fails them with
// that error.
type storeBackend struct {
	st *store.Store

	mu      sync.Mutex
	index   uint64
	leader  bool
	sendErr error
	brokers Brokers
}

func newStoreBackend(t testing.TB) *storeBackend {
	t.Helper()
	cfg := store.DefaultConfig(filepath.Join(t.TempDir(), "store"))
	cfg.CommitLogFileSize, cfg.ConsumeQueueFileSize, cfg.MaxMessageSize = 4<<20, 6000, 64<<10
	cfg.IndexMaxHashSlots, cfg.IndexMaxIndexes = 64, 1024
	cfg.PreallocateSegments, cfg.UseAllocator, cfg.PreTouch = 0, false, false
	st, err := store.Open(vfs.OS(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return &storeBackend{st: st, leader: true}
}

func (b *storeBackend) Send(_ context.Context, msgs []message.Message) ([]store.PutResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.leader {
		return nil, fmt.Errorf("test backend: %w", ErrNotLeader)
	}
	if b.sendErr != nil {
		return nil, b.sendErr
	}
	for i := range msgs {
		if err := b.st.ValidateMessage(&msgs[i]); err != nil {
			return nil, err
		}
	}
	b.index++
	h := store.EntryHeader{RaftIndex: b.index, Term: 1, StoreTimestamp: time.Now().UnixMilli(),
		StoreHost: message.HostPort{IP: [4]byte{127, 0, 0, 1}, Port: 10911}}
	return b.st.AppendMessages(h, msgs, nil)
}

// deliver applies a DeliverDue entry stamped at (what the cluster's
// scheduler proposes when a delayed message is due) and returns how many
// messages it delivered.
func (b *storeBackend) deliver(t testing.TB, at time.Time) int {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.index++
	n, err := b.st.DeliverDue(store.EntryHeader{RaftIndex: b.index, Term: 1, StoreTimestamp: at.UnixMilli(),
		StoreHost: message.HostPort{IP: [4]byte{127, 0, 0, 1}, Port: 10911}})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (b *storeBackend) Reader() store.Reader { return b.st }

func (b *storeBackend) IsLeader() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.leader
}

func (b *storeBackend) Brokers(context.Context) (Brokers, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.brokers, nil
}

// served is a broker serving its broker and name-server protocols on
// loopback, with a client connected to each.
type served struct {
	b            *Broker
	brokerAddr   string
	nsAddr       string
	brokerClient *remoting.Client
	nsClient     *remoting.Client
}

func serve(t testing.TB, backend Backend, opts ...func(*Options)) *served {
	t.Helper()
	return serveTLS(t, backend, nil, nil, opts...)
}

// serveTLS is serve with both listeners behind tls.NewListener(srvTLS)
// and the test's clients dialling with cliTLS (both nil: plaintext).
func serveTLS(t testing.TB, backend Backend, srvTLS, cliTLS *tls.Config, opts ...func(*Options)) *served {
	t.Helper()
	o := Options{AutoCreateTopics: true, DefaultQueues: 8}
	for _, f := range opts {
		f(&o)
	}
	b := New(backend, o)
	s := &served{b: b}
	for _, h := range []struct {
		handler remoting.Handler
		addr    *string
		client  **remoting.Client
	}{{b, &s.brokerAddr, &s.brokerClient}, {b.NameServer(), &s.nsAddr, &s.nsClient}} {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		if srvTLS != nil {
			lis = tls.NewListener(lis, srvTLS)
		}
		srv := remoting.NewServer(h.handler, remoting.Options{})
		done := make(chan error, 1)
		go func() { done <- srv.Serve(lis) }()
		t.Cleanup(func() {
			_ = srv.Close()
			if err := <-done; !errors.Is(err, remoting.ErrServerClosed) {
				t.Errorf("serve: %v", err)
			}
		})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := remoting.DialTLS(ctx, lis.Addr().String(), cliTLS)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		*h.client = c
		*h.addr = lis.Addr().String()
	}
	t.Cleanup(func() { _ = b.Close() })
	return s
}

func invoke(t testing.TB, c *remoting.Client, req *remoting.Command) *remoting.Command {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, req)
	if err != nil {
		t.Fatalf("invoke code %d: %v", req.Code, err)
	}
	return resp
}

func routeRequest(topic string) *remoting.Command {
	return &remoting.Command{Code: remoting.CodeGetRouteInfoByTopic, ExtFields: map[string]string{"topic": topic}}
}

// props encodes RocketMQ properties (name\x01value\x02).
func props(kv ...string) string {
	var b strings.Builder
	for i := 0; i+1 < len(kv); i += 2 {
		b.WriteString(kv[i] + "\x01" + kv[i+1] + "\x02")
	}
	return b.String()
}

func sendRequest(code int16, h remoting.SendHeader, body []byte) *remoting.Command {
	short := code == remoting.CodeSendMessageV2 || code == remoting.CodeSendBatchMessage
	return &remoting.Command{Code: code, ExtFields: h.Fields(short), Body: body}
}

// TestRoute: an unknown topic is TOPIC_NOT_EXIST, the default topic is
// routed with the default queue count while topics are created on first
// use, a group's retry topic with one queue before it exists, a topic the store holds with its own, on one broker name whose id 0
// is the leader and ids 1, 2 the followers; the broker address answers
// routes too.
func TestRoute(t *testing.T) {
	be := newStoreBackend(t)
	be.brokers = Brokers{Leader: "10.0.0.1:10911", Followers: []string{"10.0.0.2:10911", "10.0.0.3:10911"}}
	s := serve(t, be)
	if resp := invoke(t, s.nsClient, routeRequest("orders")); resp.Code != remoting.CodeTopicNotExist {
		t.Fatalf("unknown topic: code %d (%s), want TOPIC_NOT_EXIST", resp.Code, resp.Remark)
	}
	be.index = 1
	if err := be.st.CreateTopic(store.EntryHeader{RaftIndex: 1, Term: 1}, store.TopicConfig{Name: "orders", Queues: 3}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		client *remoting.Client
		topic  string
		queues int32
	}{{s.nsClient, "TBW102", 8}, {s.nsClient, "orders", 3}, {s.brokerClient, "orders", 3}, {s.nsClient, "%RETRY%not-yet-created", 1}} {
		resp := invoke(t, c.client, routeRequest(c.topic))
		if resp.Code != remoting.CodeSuccess {
			t.Fatalf("route of %s: code %d (%s)", c.topic, resp.Code, resp.Remark)
		}
		var rd remoting.TopicRouteData
		if err := json.Unmarshal(resp.Body, &rd); err != nil {
			t.Fatalf("route body %s: %v", resp.Body, err)
		}
		if len(rd.QueueDatas) != 1 || rd.QueueDatas[0].WriteQueueNums != c.queues || rd.QueueDatas[0].ReadQueueNums != c.queues ||
			rd.QueueDatas[0].Perm != remoting.PermRead|remoting.PermWrite {
			t.Fatalf("route of %s: queue data %+v, want %d queues read+write", c.topic, rd.QueueDatas, c.queues)
		}
		want := map[int64]string{0: "10.0.0.1:10911", 1: "10.0.0.2:10911", 2: "10.0.0.3:10911"}
		if len(rd.BrokerDatas) != 1 || fmt.Sprint(rd.BrokerDatas[0].BrokerAddrs) != fmt.Sprint(want) ||
			rd.BrokerDatas[0].BrokerName != rd.QueueDatas[0].BrokerName {
			t.Fatalf("route of %s: broker data %+v, want one broker %v", c.topic, rd.BrokerDatas, want)
		}
	}
	be.brokers = Brokers{}
	if resp := invoke(t, s.nsClient, routeRequest("orders")); resp.Code != remoting.CodeSystemError || !strings.Contains(resp.Remark, "no leader") {
		t.Fatalf("route without a leader: code %d (%s), want SYSTEM_ERROR naming the missing leader", resp.Code, resp.Remark)
	}
}

// replicate applies one command to the store as the leader would after
// Raft committed it; a backend that is not the leader refuses.
func (b *storeBackend) replicate(apply func(h store.EntryHeader) error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.leader {
		return fmt.Errorf("test backend: %w", ErrNotLeader)
	}
	b.index++
	return apply(store.EntryHeader{RaftIndex: b.index, Term: 1})
}

func (b *storeBackend) CommitOffsets(_ context.Context, commits []store.OffsetCommit) error {
	return b.replicate(func(h store.EntryHeader) error { return b.st.CommitOffsets(h, commits) })
}

func (b *storeBackend) CreateTopic(_ context.Context, t store.TopicConfig) error {
	return b.replicate(func(h store.EntryHeader) error { return b.st.CreateTopic(h, t) })
}
