package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/raftmq/raftmq/client"
)

type consumeFlags struct {
	topic, group, tag string
	queue             int
	from              int64
	n                 int64
	toEnd             bool
	wait              time.Duration
	fromSet           bool
	fromTimeArg       string
	fromTime          time.Time // zero: no --from-time
}

func consumeCmd(e *env) *cobra.Command {
	var f consumeFlags
	cmd := &cobra.Command{
		Use:   "consume -t T [-q Q] [--from OFFSET | --from-time RFC3339 | --group G] [-n N] [--to-end] [--tag TAG]",
		Short: "Read messages of topic T",
		Long: `Read messages of topic T from every queue (or queue Q), starting at each
queue's min offset, at --from, at the first message stored at or after
--from-time (each queue's max offset if all are older), or at the consumer
group's committed offset (with --group, progress is committed after each
batch printed; a queue without one starts at its min offset). --to-end
stops at the queues' max offsets as they were at the start; -n after N.

With --group and no -q the consumer is a member of the group: it beats to
the leader every 2 s, and the group's live members divide the topic's
queues among them (RocketMQ's averaging), so two consumers of one group
read disjoint queues; when one joins or leaves (or stops beating for
10 s) the others take over its queues from the committed offsets. A
message being handled while its queue moves may be printed by both
(at-least-once).`,
		Args: noArgs,
		RunE: e.action(func(e *env, cmd *cobra.Command, _ []string) error {
			f.fromSet = cmd.Flags().Changed("from")
			timeSet := cmd.Flags().Changed("from-time")
			switch {
			case f.topic == "":
				return usagef("-t TOPIC is required")
			case f.fromSet && f.group != "":
				return usagef("--from and --group exclude each other")
			case timeSet && (f.fromSet || f.group != ""):
				return usagef("--from-time excludes --from and --group (move a group with: group reset G -t T --to-time)")
			case f.from < 0 || f.n < 0 || f.queue < -1:
				return usagef("negative -q, --from or -n")
			case f.wait < 0 || f.wait > time.Minute:
				return usagef("--wait %v out of range [0, 1m]", f.wait)
			}
			if timeSet {
				t, err := parseTime("--from-time", f.fromTimeArg)
				if err != nil {
					return err
				}
				f.fromTime = t
			}
			c, err := e.connect()
			if err != nil {
				return err
			}
			defer c.Close()
			return consume(e, c, f)
		}),
	}
	fl := cmd.Flags()
	topicFlag(e, cmd, &f.topic, "topic (required)")
	fl.IntVarP(&f.queue, "queue", "q", -1, "queue id (default: every queue)")
	fl.Int64Var(&f.from, "from", 0, "start offset in every queue (default: the queue's min offset)")
	fl.StringVar(&f.fromTimeArg, "from-time", "", "start in every queue at the first message stored at or after this RFC3339 time")
	fl.StringVar(&f.group, "group", "", "consumer group: start at its committed offsets and commit progress")
	fl.Int64VarP(&f.n, "num", "n", 0, "stop after N messages (0: no limit)")
	fl.BoolVar(&f.toEnd, "to-end", false, "stop at the queues' max offsets as of the start")
	fl.StringVar(&f.tag, "tag", "", "only messages with this tag (a||b for either)")
	fl.DurationVar(&f.wait, "wait", 2*time.Second, "long-poll wait per pull")
	return cmd
}

// consumer reads queues concurrently and prints messages in one stream.
type consumer struct {
	e     *env
	c     *client.Client
	f     consumeFlags
	outMu sync.Mutex
	count atomic.Int64
	done  chan struct{} // closed when -n is reached
	once  sync.Once
}

func consume(e *env, c *client.Client, f consumeFlags) error {
	queues, err := consumeQueues(e, c, f)
	if err != nil {
		return err
	}
	k := &consumer{e: e, c: c, f: f, done: make(chan struct{})}
	prog := startProgress(e, func() string { return fmt.Sprintf("consumed %d", k.count.Load()) })
	defer prog.Stop()
	if f.group != "" && f.queue < 0 {
		return k.asMember(queues)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(queues))
	for i, q := range queues {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = k.queue(e.ctx, q)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func consumeQueues(e *env, c *client.Client, f consumeFlags) ([]int32, error) {
	if f.queue >= 0 {
		return []int32{int32(f.queue)}, nil
	}
	t, err := c.DescribeTopic(e.ctx, f.topic)
	if err != nil {
		return nil, err
	}
	qs := make([]int32, t.Queues)
	for i := range qs {
		qs[i] = int32(i)
	}
	return qs, nil
}

// start returns the first offset and, with --to-end, the stop offset.
func (k *consumer) start(q int32) (off, end int64, err error) {
	lo, hi, err := k.c.MinMaxOffset(k.e.ctx, k.f.topic, q)
	if err != nil {
		return 0, 0, err
	}
	end = -1
	if k.f.toEnd {
		end = hi
	}
	switch {
	case k.f.fromSet:
		return k.f.from, end, nil
	case !k.f.fromTime.IsZero():
		off, err := k.c.OffsetAtOrAfter(k.e.ctx, k.f.topic, q, k.f.fromTime)
		return off, end, err
	case k.f.group != "":
		g, found, err := k.c.QueryOffset(k.e.ctx, k.f.group, k.f.topic, q)
		if err != nil {
			return 0, 0, err
		}
		if found {
			return g, end, nil
		}
	}
	return lo, end, nil
}

func (k *consumer) queue(ctx context.Context, q int32) error {
	off, end, err := k.start(q)
	if err != nil {
		return fmt.Errorf("queue %d: %w", q, err)
	}
	for end < 0 || off < end {
		select {
		case <-k.done:
			return nil
		case <-ctx.Done():
			return nil
		default:
		}
		r, err := k.c.Pull(ctx, client.PullRequest{Topic: k.f.topic, QueueID: q, Offset: off,
			MaxWait: k.f.wait, Tag: k.f.tag})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("queue %d offset %d: %w", q, off, err)
		}
		if r.Status == client.StatusNoMatchedQueue {
			return fmt.Errorf("queue %d of topic %s does not exist", q, k.f.topic)
		}
		next, all, err := k.deliver(r.Messages, end)
		if err != nil {
			return err
		}
		if all {
			next = r.NextOffset // also skips messages the tag filter dropped
		}
		if next > off && k.f.group != "" {
			if err := k.commit(q, next); err != nil {
				return fmt.Errorf("commit offset: %w", err)
			}
		}
		if !all {
			return nil
		}
		if next > off {
			off = next
		} else if end >= 0 && r.MaxOffset <= off {
			return nil // --to-end: nothing more will count
		}
	}
	return nil
}

// commit commits the group's offset of a queue after a batch was printed,
// even while the command is stopping (within 5 s): what was printed must
// not be read again by the group.
func (k *consumer) commit(q int32, next int64) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(k.e.ctx), 5*time.Second)
	defer cancel()
	return k.c.CommitOffset(ctx, k.f.group, k.f.topic, q, next)
}

// deliver prints messages until -n or the --to-end offset is reached. It
// returns the offset after the last message printed and whether every
// message was printed.
func (k *consumer) deliver(ms []client.ReceivedMessage, end int64) (next int64, all bool, err error) {
	k.outMu.Lock()
	defer k.outMu.Unlock()
	next = -1
	for _, m := range ms {
		if end >= 0 && m.QueueOffset >= end {
			return next, false, nil
		}
		if k.f.n > 0 && k.count.Load() >= k.f.n {
			k.once.Do(func() { close(k.done) })
			return next, false, nil
		}
		if err := printMessage(k.e, m); err != nil {
			return next, false, err
		}
		next = m.QueueOffset + 1
		if k.count.Add(1) == k.f.n {
			k.once.Do(func() { close(k.done) })
		}
	}
	return next, true, nil
}

// messageJSON is the --json form of a message.
type messageJSON struct {
	MsgID          string            `json:"msgId"`
	OffsetMsgID    string            `json:"offsetMsgId"`
	Topic          string            `json:"topic"`
	QueueID        int32             `json:"queueId"`
	QueueOffset    int64             `json:"queueOffset"`
	PhysicalOffset int64             `json:"physicalOffset"`
	StoreTimestamp int64             `json:"storeTimestamp"`
	BornTimestamp  int64             `json:"bornTimestamp"`
	BornHost       string            `json:"bornHost"`
	StoreHost      string            `json:"storeHost"`
	Tags           string            `json:"tags"`
	Keys           []string          `json:"keys"`
	Properties     map[string]string `json:"properties"`
	Body           string            `json:"body"`
	BodyEncoding   string            `json:"bodyEncoding,omitempty"`
}

func toJSON(m client.ReceivedMessage) messageJSON {
	j := messageJSON{MsgID: m.MsgID, OffsetMsgID: m.OffsetMsgID, Topic: m.Topic, QueueID: m.QueueID,
		QueueOffset: m.QueueOffset, PhysicalOffset: m.PhysicalOffset, StoreTimestamp: m.StoreTimestamp,
		BornTimestamp: m.BornTimestamp, BornHost: m.BornHost, StoreHost: m.StoreHost, Tags: m.Tags,
		Keys: m.Keys, Properties: m.Properties, Body: string(m.Body)}
	if j.Keys == nil {
		j.Keys = []string{}
	}
	if !utf8.Valid(m.Body) {
		j.Body, j.BodyEncoding = base64.StdEncoding.EncodeToString(m.Body), "base64"
	}
	return j
}

func printMessage(e *env, m client.ReceivedMessage) error {
	if e.json {
		return e.emit(toJSON(m))
	}
	body := m.Body
	if len(body) > 80 {
		body = body[:80]
	}
	_, err := fmt.Fprintf(e.stdout, "%s\t%d\t%d\t%s\t%q\n", m.Topic, m.QueueID, m.QueueOffset, m.MsgID, body)
	return err
}
