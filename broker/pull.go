package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/store"
)

// Pull system flags (PullSysFlag in apache/rocketmq).
const (
	pullFlagCommitOffset = 1 << 0 // commitOffset carries the group's offset to commit
	pullFlagSuspend      = 1 << 1 // hold the pull until a message arrives
)

// Bounds of one pull answer.
const (
	maxPullMessages = 64
	maxPullBytes    = 4 << 20
	// maxSuspend bounds a long poll below the clients' 30 s pull timeout.
	maxSuspend = 25 * time.Second
)

// pullRequest is PULL_MESSAGE's header.
type pullRequest struct {
	group, topic, subscription, expressionType string
	queue                                      int32
	offset, commitOffset                       int64
	maxMessages                                int
	sysFlag                                    int64
	suspend                                    time.Duration
}

// fieldError names the ext field that did not parse.
func fieldError(key, value string, err error) error {
	return fmt.Errorf("field %s %q: %w", key, value, err)
}

func parseInt(req *remoting.Command, key string, bits int) (int64, error) {
	v := req.Field(key)
	n, err := strconv.ParseInt(v, 10, bits)
	if err != nil {
		return 0, fieldError(key, v, err)
	}
	return n, nil
}

// parseInts parses the named fields in order; the first failure wins.
func parseInts(req *remoting.Command, fields ...intField) error {
	for _, f := range fields {
		n, err := parseInt(req, f.key, f.bits)
		if err != nil {
			return err
		}
		*f.dst = n
	}
	return nil
}

// intField is an integer ext field of bits bits to parse into dst.
type intField struct {
	key  string
	bits int
	dst  *int64
}

func parsePull(req *remoting.Command) (pullRequest, error) {
	p := pullRequest{group: req.Field("consumerGroup"), topic: req.Field("topic"),
		subscription: req.Field("subscription"), expressionType: req.Field("expressionType")}
	var queue, maxNums, suspendMS int64
	err := parseInts(req, intField{"queueId", 32, &queue}, intField{"queueOffset", 64, &p.offset},
		intField{"maxMsgNums", 32, &maxNums}, intField{"sysFlag", 32, &p.sysFlag})
	if err != nil {
		return p, err
	}
	// Optional fields: absent means none.
	if req.Field("commitOffset") != "" {
		if p.commitOffset, err = parseInt(req, "commitOffset", 64); err != nil {
			return p, err
		}
	}
	if req.Field("suspendTimeoutMillis") != "" {
		if suspendMS, err = parseInt(req, "suspendTimeoutMillis", 64); err != nil {
			return p, err
		}
	}
	if p.group == "" || p.topic == "" {
		return p, errors.New("consumerGroup and topic are required")
	}
	p.queue, p.maxMessages = int32(queue), int(min(max(maxNums, 1), maxPullMessages))
	p.suspend = min(time.Duration(max(suspendMS, 0))*time.Millisecond, maxSuspend)
	return p, nil
}

// pull answers PULL_MESSAGE: up to maxMsgNums records of a queue from
// queueOffset, packed as the commitlog holds them, matching the tag
// subscription ("a || b"; "" or "*" all). With the suspend flag and nothing
// to read it waits for a message up to suspendTimeoutMillis (long poll).
// With the commit flag the group's offset is committed first, on the
// leader.
func (b *Broker) pull(ctx context.Context, req *remoting.Command) *remoting.Command {
	p, err := parsePull(req)
	if err != nil {
		return req.Response(remoting.CodeSystemError, "pull: "+err.Error())
	}
	if p.expressionType != "" && p.expressionType != "TAG" {
		return req.Response(remoting.CodeSubscriptionParseFail, fmt.Sprintf("pull: expression type %q is not supported (TAG only)", p.expressionType))
	}
	if _, ok := b.backend.Reader().Topic(p.topic); !ok && !strings.HasPrefix(p.topic, retryPrefix) {
		return req.Response(remoting.CodeTopicNotExist, fmt.Sprintf("topic %s does not exist", p.topic))
	}
	if p.sysFlag&pullFlagCommitOffset != 0 && p.commitOffset > 0 { // clients set the flag only with an offset
		b.commitQuietly(ctx, store.OffsetCommit{Group: p.group, Topic: p.topic, QueueID: p.queue, Offset: p.commitOffset})
	}
	read, err := b.readPull(p)
	if err == nil && len(read.body) == 0 && p.sysFlag&pullFlagSuspend != 0 && p.suspend > 0 {
		if b.hold(ctx, p, read) == nil {
			read, err = b.readPull(p)
		}
	}
	if err != nil {
		return req.Response(remoting.CodeSystemError, "pull: "+err.Error())
	}
	b.stats.pulls.Add(1)
	return pullAnswer(req, p, read)
}

// errNothingToAwait: a pull's answer does not get better by waiting.
var errNothingToAwait = errors.New("broker: nothing to wait for")

// hold waits, up to the pull's suspend timeout, for what would change an
// empty answer: a message written at the end of the queue, or the first
// held-back retry coming due.
func (b *Broker) hold(ctx context.Context, p pullRequest, read pullRead) error {
	ctx, cancel := context.WithTimeout(ctx, p.suspend)
	defer cancel()
	switch {
	case !read.dueAt.IsZero():
		t := time.NewTimer(read.dueAt.Sub(b.o.Now()))
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	case read.res.Status == store.OffsetOverflowOne || read.res.Status == store.NoMessageInQueue || read.res.Status == store.NoMatchedLogicQueue:
		return b.backend.Reader().WaitMessage(ctx, p.topic, p.queue, p.offset)
	}
	return errNothingToAwait
}

// pullRead is one read of a pull: the records packed, the store's result
// and, when a retry record not yet due stopped the read, its queue offset
// and when it is due.
type pullRead struct {
	body     []byte
	res      store.GetResult
	heldFrom int64
	dueAt    time.Time
}

// readPull reads one pull's records into a body, up to the first record of
// a retry topic that is not due yet.
func (b *Broker) readPull(p pullRequest) (pullRead, error) {
	var read pullRead
	now := b.o.Now()
	res, err := b.backend.Reader().ReadMessages(p.topic, p.queue, p.offset, p.maxMessages, maxPullBytes, p.subscription,
		func(r *message.Record) error {
			if !read.dueAt.IsZero() {
				return nil
			}
			if ok, at := due(p.topic, r, now); !ok {
				read.heldFrom, read.dueAt = r.QueueOffset, at
				return nil
			}
			read.body = message.AppendRecord(read.body, r)
			return nil
		})
	read.res = res
	return read, err
}

// pullAnswer maps a read to PULL_MESSAGE's codes and header.
func pullAnswer(req *remoting.Command, p pullRequest, read pullRead) *remoting.Command {
	res := read.res
	code, next := remoting.CodePullNotFound, res.NextOffset
	switch res.Status {
	case store.Found:
		code = remoting.CodeSuccess
		if len(read.body) == 0 { // every record in the window was filtered out
			code = remoting.CodePullRetryImmediately
		}
	case store.NoMatchedMessage:
		code = remoting.CodePullRetryImmediately
	case store.OffsetTooSmall, store.OffsetOverflowBadly:
		code = remoting.CodePullOffsetMoved
	case store.OffsetOverflowOne, store.NoMessageInQueue, store.NoMatchedLogicQueue:
		next = p.offset
		if res.Status == store.NoMessageInQueue {
			next = 0
		}
	}
	if !read.dueAt.IsZero() { // a retry not due yet: deliver up to it, then wait for it
		next = read.heldFrom
		if len(read.body) == 0 {
			code = remoting.CodePullNotFound
		}
	}
	resp := req.Response(code, "")
	resp.ExtFields["nextBeginOffset"] = strconv.FormatInt(next, 10)
	resp.ExtFields["minOffset"] = strconv.FormatInt(res.MinOffset, 10)
	resp.ExtFields["maxOffset"] = strconv.FormatInt(res.MaxOffset, 10)
	resp.ExtFields["suggestWhichBrokerId"] = "0"
	if code == remoting.CodeSuccess {
		resp.Body = read.body
	}
	return resp
}

// commitQuietly commits a pull's piggy-backed offset on the leader; a
// follower ignores it, as a RocketMQ slave does (the client commits it
// again by UPDATE_CONSUMER_OFFSET).
func (b *Broker) commitQuietly(ctx context.Context, c store.OffsetCommit) {
	err := b.backend.CommitOffsets(ctx, []store.OffsetCommit{c})
	if err != nil && !errors.Is(err, ErrNotLeader) {
		b.o.Logger.Debug("offset commit with a pull failed", "group", c.Group, "topic", c.Topic, "queue", c.QueueID, "error", err)
	}
}

// queryConsumerOffset answers QUERY_CONSUMER_OFFSET with ext offset, or
// QUERY_NOT_FOUND when the group committed none for the queue.
func (b *Broker) queryConsumerOffset(req *remoting.Command) *remoting.Command {
	queue, err := parseInt(req, "queueId", 32)
	if err != nil {
		return req.Response(remoting.CodeSystemError, err.Error())
	}
	off, ok := b.backend.Reader().ConsumerOffset(req.Field("consumerGroup"), req.Field("topic"), int32(queue))
	if !ok {
		return req.Response(remoting.CodeQueryNotFound, "no committed offset")
	}
	resp := req.Response(remoting.CodeSuccess, "")
	resp.ExtFields["offset"] = strconv.FormatInt(off, 10)
	return resp
}

// updateConsumerOffset commits a group's offset through Raft; a member
// that is not the leader relays it.
func (b *Broker) updateConsumerOffset(ctx context.Context, req *remoting.Command) *remoting.Command {
	var queue, off int64
	if err := parseInts(req, intField{"queueId", 32, &queue}, intField{"commitOffset", 64, &off}); err != nil {
		return req.Response(remoting.CodeSystemError, err.Error())
	}
	if req.Field("consumerGroup") == "" || req.Field("topic") == "" || off < 0 {
		return req.Response(remoting.CodeSystemError, "consumerGroup, topic and a commitOffset ≥ 0 are required")
	}
	err := b.backend.CommitOffsets(ctx, []store.OffsetCommit{{Group: req.Field("consumerGroup"), Topic: req.Field("topic"),
		QueueID: int32(queue), Offset: off}})
	switch {
	case errors.Is(err, ErrNotLeader):
		return b.relay(ctx, req)
	case errors.Is(err, ErrBusy):
		return req.Response(remoting.CodeSystemBusy, err.Error())
	case err != nil:
		return req.Response(remoting.CodeSystemError, err.Error())
	}
	return req.Response(remoting.CodeSuccess, "")
}
