package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/raftmq/raftmq/membership"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/store"
)

// ConsumerExpiry is how long a consumer client stays a member of its groups
// without a heartbeat (RocketMQ's 120 s channel expiry; clients beat every
// 30 s). A client also leaves when it unregisters or its connection closes.
const ConsumerExpiry = 120 * time.Second

// retryPrefix names a group's retry topic, which its consumers subscribe to.
const retryPrefix = "%RETRY%"

// heartbeat is HEART_BEAT's JSON body, the fields the broker reads.
type heartbeat struct {
	ClientID  string `json:"clientID"`
	Consumers []struct {
		Group         string `json:"groupName"`
		Subscriptions []struct {
			Topic string `json:"topic"`
		} `json:"subscriptionDataSet"`
	} `json:"consumerDataSet"`
}

// groups tracks the live consumer clients of each group on this node, by
// the connection each last beat on (every node hears every client: the
// clients beat to every broker address of a route), and tells a group's
// members when its membership changes.
type groups struct {
	table *membership.Table[*remoting.Conn]

	mu      sync.Mutex
	watched map[*remoting.Conn]bool
	closed  chan struct{}
	wg      sync.WaitGroup
}

func newGroups(now func() time.Time) *groups {
	return &groups{table: membership.New[*remoting.Conn](ConsumerExpiry, now), watched: map[*remoting.Conn]bool{},
		closed: make(chan struct{})}
}

// join records a heartbeat of clientID in group on conn and reports whether
// the client is new to the group.
func (g *groups) join(group, clientID string, conn *remoting.Conn) bool {
	joined := g.table.Beat(group, clientID, conn)
	g.mu.Lock()
	defer g.mu.Unlock()
	if conn != nil && !g.watched[conn] {
		select {
		case <-g.closed:
		default:
			g.watched[conn] = true
			g.wg.Add(1)
			go g.watch(conn)
		}
	}
	return joined
}

// watch removes the members of a connection once it closes and tells their
// groups.
func (g *groups) watch(conn *remoting.Conn) {
	defer g.wg.Done()
	select {
	case <-conn.Context().Done():
	case <-g.closed:
		return
	}
	g.mu.Lock()
	delete(g.watched, conn)
	g.mu.Unlock()
	for _, group := range g.table.RemoveIf(func(c *remoting.Conn) bool { return c == conn }) {
		g.notify(group)
	}
}

// notify sends NOTIFY_CONSUMER_IDS_CHANGED (one way) to every member of a
// group, which makes their clients rebalance at once. A member whose
// connection cannot take it learns at its next periodic rebalance.
func (g *groups) notify(group string) {
	for _, c := range g.table.Values(group) {
		if c != nil {
			_ = c.Send(&remoting.Command{Code: remoting.CodeNotifyConsumerIDs, Language: remoting.LanguageJava,
				Flag: remoting.FlagOneway, ExtFields: map[string]string{"consumerGroup": group}})
		}
	}
}

// close stops watching connections and waits for the watchers.
func (g *groups) close() {
	g.mu.Lock()
	select {
	case <-g.closed:
	default:
		close(g.closed)
	}
	g.mu.Unlock()
	g.wg.Wait()
}

// heartbeat answers HEART_BEAT: each consumer group in the body gains or
// refreshes the client; a client new to a group makes its members
// rebalance, and the group's retry topic is created if missing (on the
// leader; the clients beat to every member).
func (b *Broker) heartbeat(ctx context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	var hb heartbeat
	if err := json.Unmarshal(req.Body, &hb); err != nil {
		return req.Response(remoting.CodeSystemError, "heartbeat body: "+err.Error())
	}
	for _, c := range hb.Consumers {
		if c.Group == "" || hb.ClientID == "" {
			continue
		}
		if b.groups.join(c.Group, hb.ClientID, conn) {
			b.groups.notify(c.Group)
		}
		b.ensureRetryTopic(ctx, c.Group)
	}
	return req.Response(remoting.CodeSuccess, "")
}

// ensureRetryTopic creates a group's retry topic (one queue) if the store
// has none; only the leader can, the others leave it to the leader.
func (b *Broker) ensureRetryTopic(ctx context.Context, group string) {
	topic := retryPrefix + group
	if _, ok := b.backend.Reader().Topic(topic); ok {
		return
	}
	err := b.backend.CreateTopic(ctx, store.TopicConfig{Name: topic, Queues: 1})
	if err != nil && !errors.Is(err, ErrNotLeader) {
		b.o.Logger.Debug("retry topic not created", "topic", topic, "error", err)
	}
}

// unregister answers UNREGISTER_CLIENT: the client leaves the consumer
// group named, and the group's members rebalance.
func (b *Broker) unregister(req *remoting.Command) *remoting.Command {
	if group, id := req.Field("consumerGroup"), req.Field("clientID"); group != "" && b.groups.table.Leave(group, id) {
		b.groups.notify(group)
	}
	return req.Response(remoting.CodeSuccess, "")
}

// consumerList answers GET_CONSUMER_LIST_BY_GROUP with the group's live
// client ids ({"consumerIdList":[...]}).
func (b *Broker) consumerList(req *remoting.Command) *remoting.Command {
	group := strings.TrimSpace(req.Field("consumerGroup"))
	if group == "" {
		return req.Response(remoting.CodeSystemError, "consumerGroup is required")
	}
	ids := b.groups.table.Members(group)
	if len(ids) == 0 {
		return req.Response(remoting.CodeSystemError, fmt.Sprintf("no consumer of group %s is connected", group))
	}
	body, err := json.Marshal(struct {
		IDs []string `json:"consumerIdList"`
	}{ids})
	if err != nil {
		return req.Response(remoting.CodeSystemError, err.Error())
	}
	resp := req.Response(remoting.CodeSuccess, "")
	resp.Body = body
	return resp
}
