package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"

	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
)

func (d *Dashboard) getStatus(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := d.ctx(r)
	defer cancel()
	st, err := d.api.Status(ctx, &pb.StatusRequest{})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, st)
}

// maxTopicsDescribed bounds the per-topic calls one GET /api/topics makes.
const maxTopicsDescribed = 1000

func (d *Dashboard) getTopics(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := d.ctx(r)
	defer cancel()
	list, err := d.api.ListTopics(ctx, &pb.ListTopicsRequest{})
	if err != nil {
		writeError(w, err)
		return
	}
	out := &pb.ListTopicsResponse{}
	for i, t := range list.GetTopics() {
		if i == maxTopicsDescribed {
			break
		}
		info, err := d.api.DescribeTopic(ctx, &pb.DescribeTopicRequest{Name: t.GetName()})
		if err != nil {
			// Deleted between the list and the describe: leave it out.
			continue
		}
		out.Topics = append(out.Topics, info)
	}
	writeJSON(w, out)
}

// groupJSON is one consumer group on the groups page.
type groupJSON struct {
	Summary json.RawMessage `json:"summary"` // pb.GroupSummary
	Queues  json.RawMessage `json:"queues"`  // pb.DescribeGroupResponse
	Members []string        `json:"members"` // live gRPC members (leader's table)
}

// maxGroupsDescribed bounds the per-group calls one GET /api/groups makes.
const maxGroupsDescribed = 200

func (d *Dashboard) getGroups(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := d.ctx(r)
	defer cancel()
	list, err := d.api.ListGroups(ctx, &pb.ListGroupsRequest{})
	if err != nil {
		writeError(w, err)
		return
	}
	out := []groupJSON{}
	for i, g := range list.GetGroups() {
		if i == maxGroupsDescribed {
			break
		}
		desc, err := d.api.DescribeGroup(ctx, &pb.DescribeGroupRequest{Group: g.GetGroup()})
		if err != nil {
			continue // gone between the list and the describe
		}
		members := []string{}
		if m, err := d.api.JoinGroup(ctx, &pb.JoinGroupRequest{Group: g.GetGroup()}); err == nil {
			members = append(members, m.GetMembers()...)
		}
		out = append(out, groupJSON{Summary: protoJSON(g), Queues: protoJSON(desc), Members: members})
	}
	writeJSON(w, map[string]any{"groups": out})
}

// maxLookup bounds a key lookup's answer.
const maxLookup = 32

// getMessages looks messages up by one of: msgId (topic optional), key
// and topic, topic+queue+offset, or phy (a commitlog offset).
func (d *Dashboard) getMessages(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := d.ctx(r)
	defer cancel()
	q := r.URL.Query()
	topic := q.Get("topic")
	var (
		res *pb.QueryMessagesResponse
		err error
	)
	switch {
	case q.Get("msgId") != "":
		res, err = d.api.QueryByMsgID(ctx, &pb.QueryByMsgIDRequest{Topic: topic, MsgId: q.Get("msgId")})
	case q.Get("key") != "":
		res, err = d.api.QueryByKey(ctx, &pb.QueryByKeyRequest{Topic: topic, Key: q.Get("key"), MaxMessages: maxLookup})
	case q.Get("phy") != "":
		phy, perr := strconv.ParseInt(q.Get("phy"), 10, 64)
		if perr != nil {
			err = badf("phy %q is not an offset", q.Get("phy"))
			break
		}
		res, err = d.api.QueryByOffset(ctx, &pb.QueryByOffsetRequest{PhysicalOffset: phy})
	case q.Get("offset") != "":
		res, err = d.messageAt(ctx, topic, q.Get("queue"), q.Get("offset"))
	default:
		err = badf("look up by msgId, by key and topic, by topic, queue and offset, or by phy")
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, &pb.QueryMessagesResponse{Messages: res.GetMessages()})
}

// messageAt reads the message at a queue offset.
func (d *Dashboard) messageAt(ctx context.Context, topic, queue, offset string) (*pb.QueryMessagesResponse, error) {
	qid, err := strconv.ParseInt(queue, 10, 32)
	if err != nil {
		return nil, badf("queue %q is not a queue id", queue)
	}
	off, err := strconv.ParseInt(offset, 10, 64)
	if err != nil {
		return nil, badf("offset %q is not an offset", offset)
	}
	res, err := d.api.Pull(ctx, &pb.PullRequest{Topic: topic, QueueId: int32(qid), Offset: off, MaxMessages: 1})
	if err != nil {
		return nil, err
	}
	msgs := res.GetMessages()
	if len(msgs) == 0 || msgs[0].GetQueueOffset() != off {
		return nil, badf("no message at %s/%d offset %d (%s; queue holds [%d, %d))",
			topic, qid, off, res.GetStatus(), res.GetMinOffset(), res.GetMaxOffset())
	}
	return &pb.QueryMessagesResponse{Messages: msgs[:1]}, nil
}

// metricsJSON is what the live charts are fed: this node's counters at
// one instant (the page turns successive samples into rates and
// quantiles).
type metricsJSON struct {
	TimeMs          int64     `json:"timeMs"`
	StoreMessages   float64   `json:"storeMessages"`
	StoreBytes      float64   `json:"storeBytes"`
	ProduceMessages float64   `json:"produceMessages"`
	CommitCount     float64   `json:"commitCount"`
	CommitBuckets   []bucket  `json:"commitBuckets"` // cumulative, seconds
	DiskUsedRatio   float64   `json:"diskUsedRatio"`
	Consumed        []counter `json:"consumed"` // per topic, pulls this node answered
}

type bucket struct {
	LE    float64 `json:"le"`
	Count float64 `json:"count"`
}

type counter struct {
	Topic string  `json:"topic"`
	Value float64 `json:"value"`
}

func (d *Dashboard) getMetrics(w http.ResponseWriter, _ *http.Request) {
	if d.metrics == nil {
		writeError(w, badf("this node exports no metrics"))
		return
	}
	families, err := d.metrics.Gather()
	if err != nil && len(families) == 0 {
		writeError(w, err)
		return
	}
	writeJSON(w, sample(families, time.Now()))
}

// sample picks the charts' series out of a gathered registry.
func sample(families []*dto.MetricFamily, now time.Time) metricsJSON {
	out := metricsJSON{TimeMs: now.UnixMilli(), CommitBuckets: []bucket{}, Consumed: []counter{}}
	for _, f := range families {
		ms := f.GetMetric()
		if len(ms) == 0 {
			continue
		}
		switch f.GetName() {
		case "raftmq_store_messages_total":
			out.StoreMessages = value(ms[0])
		case "raftmq_store_bytes_total":
			out.StoreBytes = value(ms[0])
		case "raftmq_produce_messages_total":
			out.ProduceMessages = value(ms[0])
		case "raftmq_disk_used_ratio":
			out.DiskUsedRatio = value(ms[0])
		case "raftmq_produce_commit_seconds":
			h := ms[0].GetHistogram()
			out.CommitCount = float64(h.GetSampleCount())
			for _, b := range h.GetBucket() {
				out.CommitBuckets = append(out.CommitBuckets, bucket{LE: b.GetUpperBound(), Count: float64(b.GetCumulativeCount())})
			}
		case "raftmq_topic_consumed_messages_total":
			for _, m := range ms {
				out.Consumed = append(out.Consumed, counter{Topic: label(m, "topic"), Value: value(m)})
			}
		}
	}
	return out
}

func value(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue()
	}
	return 0
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

type createTopicJSON struct {
	Name   string `json:"name"`
	Queues int32  `json:"queues"`
}

// adminAction decodes an admin POST's body into a fresh T, runs act under
// the call timeout, logs what it did (what, the request, the caller) and
// answers act's result.
func adminAction[T any](d *Dashboard, what string, act func(context.Context, *T) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req T
		if err := decodeAdmin(r, &req); err != nil {
			writeError(w, err)
			return
		}
		ctx, cancel := d.ctx(r)
		defer cancel()
		out, err := act(ctx, &req)
		if err != nil {
			writeError(w, err)
			return
		}
		d.log.Info("dashboard: "+what, "request", fmt.Sprintf("%+v", req), "from", r.RemoteAddr)
		writeJSON(w, out)
	}
}

func (d *Dashboard) createTopic(ctx context.Context, req *createTopicJSON) (any, error) {
	_, err := d.api.CreateTopic(ctx, &pb.CreateTopicRequest{Name: req.Name, Queues: req.Queues})
	return map[string]string{"created": req.Name}, err
}

type nameJSON struct {
	Name string `json:"name"`
}

func (d *Dashboard) deleteTopic(ctx context.Context, req *nameJSON) (any, error) {
	_, err := d.api.DeleteTopic(ctx, &pb.DeleteTopicRequest{Name: req.Name})
	return map[string]string{"deleted": req.Name}, err
}

// resetJSON resets a group's offsets in a topic: to "earliest" or
// "latest" on every queue, or to Offset on one queue ("offset").
type resetJSON struct {
	Group   string `json:"group"`
	Topic   string `json:"topic"`
	To      string `json:"to"`
	QueueID int32  `json:"queueId"`
	Offset  int64  `json:"offset"`
}

func (d *Dashboard) resetGroup(ctx context.Context, req *resetJSON) (any, error) {
	var commits []*pb.OffsetCommit
	switch req.To {
	case "offset":
		commits = []*pb.OffsetCommit{{Group: req.Group, Topic: req.Topic, QueueId: req.QueueID, Offset: req.Offset}}
	case "earliest", "latest":
		info, err := d.api.DescribeTopic(ctx, &pb.DescribeTopicRequest{Name: req.Topic})
		if err != nil {
			return nil, err
		}
		for _, q := range info.GetQueueOffsets() {
			off := q.GetMinOffset()
			if req.To == "latest" {
				off = q.GetMaxOffset()
			}
			commits = append(commits, &pb.OffsetCommit{Group: req.Group, Topic: req.Topic, QueueId: q.GetQueueId(), Offset: off})
		}
	default:
		return nil, badf(`to must be "earliest", "latest" or "offset", got %q`, req.To)
	}
	_, err := d.api.CommitOffset(ctx, &pb.CommitOffsetRequest{Commits: commits})
	return map[string]int{"queues": len(commits)}, err
}

type transferJSON struct {
	ID string `json:"id"`
}

func (d *Dashboard) transfer(ctx context.Context, req *transferJSON) (any, error) {
	_, err := d.api.Transfer(ctx, &pb.TransferRequest{Id: req.ID})
	return map[string]string{"transferred": req.ID}, err
}
