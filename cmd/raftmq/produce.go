package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/raftmq/raftmq/client"
)

// maxBatchBytes bounds --batch-bytes: a send of that much and one 4 MiB
// message stays below the 64 MiB gRPC message limit.
const maxBatchBytes = 32 << 20

type produceFlags struct {
	topic, key, tag, body, ackLog    string
	n, size, batch, batchBytes, conc int
	bodySet                          bool
	delay                            time.Duration
	deliverAt                        string
	deliverTime                      time.Time // parsed deliverAt
}

func produceCmd(e *env) *cobra.Command {
	var f produceFlags
	cmd := &cobra.Command{
		Use:   "produce -t T [-n N] [-s SIZE] [--key K] [--tag TAG] [--body B] [--ack-log FILE] [--delay D | --deliver-at TIME]",
		Short: "Send messages to topic T",
		Long: `Send N messages to topic T. Every message gets a unique msgId (UNIQ_KEY)
and, without --body, a body of SIZE bytes that starts with that msgId.
--ack-log FILE appends "msgId<TAB>topic<TAB>queueId<TAB>queueOffset" per
acknowledged message and "msgId<TAB>topic<TAB>?<TAB>?" when a send's
outcome is unknown. Messages go in sends of up to --batch messages and
--batch-bytes bytes (a larger message goes alone); the leader splits a send
larger than its group_commit.max_bytes across Raft entries. Sends are
idempotent: the client resends a send whose outcome is unknown and the
cluster stores it once.
--delay D (e.g. 30s, 2h) or --deliver-at TIME (RFC 3339) delivers the
messages later, at most 40 days ahead: until then they wait in the
schedule topic (SCHEDULE_TOPIC_XXXX, where the ack log places them) and
consumers of T do not see them. Exit status 1 if any send failed or is
unknown.`,
		Args: noArgs,
		RunE: e.action(func(e *env, cmd *cobra.Command, _ []string) error {
			f.bodySet = cmd.Flags().Changed("body")
			if err := f.check(); err != nil {
				return err
			}
			return produce(e, f)
		}),
	}
	fl := cmd.Flags()
	topicFlag(e, cmd, &f.topic, "topic (required)")
	fl.IntVarP(&f.n, "num", "n", 1, "number of messages")
	fl.IntVarP(&f.size, "size", "s", 128, "body size in bytes (ignored with --body)")
	fl.StringVar(&f.key, "key", "", "KEYS property of every message")
	fl.StringVar(&f.tag, "tag", "", "TAGS property of every message")
	fl.StringVar(&f.body, "body", "", "body of every message")
	fl.StringVar(&f.ackLog, "ack-log", "", "append msgId, topic, queueId, queueOffset of every acknowledged message")
	fl.IntVar(&f.batch, "batch", 64, "messages per send")
	fl.IntVar(&f.batchBytes, "batch-bytes", client.DefaultMaxBatchBytes, "bytes per send (bodies and properties); a larger message is sent alone")
	fl.IntVarP(&f.conc, "concurrency", "c", 4, "sends in flight")
	fl.DurationVar(&f.delay, "delay", 0, "deliver each message this long after it is stored (at most 40 days)")
	fl.StringVar(&f.deliverAt, "deliver-at", "", "deliver the messages at this time (RFC 3339, at most 40 days ahead)")
	cmd.MarkFlagsMutuallyExclusive("delay", "deliver-at")
	return cmd
}

func (f *produceFlags) check() error {
	switch {
	case f.topic == "":
		return usagef("-t TOPIC is required")
	case f.n < 1:
		return usagef("-n %d: need at least 1 message", f.n)
	case f.size < 0:
		return usagef("-s %d is negative", f.size)
	case f.batch < 1 || f.batch > 4096:
		return usagef("--batch %d out of range [1, 4096]", f.batch)
	case f.batchBytes < 1 || f.batchBytes > maxBatchBytes:
		return usagef("--batch-bytes %d out of range [1, %d]: a send must stay well below the 64 MiB gRPC message limit", f.batchBytes, maxBatchBytes)
	case f.conc < 1:
		return usagef("-c %d: need at least 1", f.conc)
	case f.delay < 0 || f.delay > maxDelay:
		return usagef("--delay %v out of range [0, %v]", f.delay, maxDelay)
	}
	if f.deliverAt != "" {
		t, err := time.Parse(time.RFC3339Nano, f.deliverAt)
		if err != nil {
			return usagef("--deliver-at %q: want an RFC 3339 time such as 2026-12-24T18:00:00Z", f.deliverAt)
		}
		if time.Until(t) > maxDelay {
			return usagef("--deliver-at %s is more than 40 days ahead", f.deliverAt)
		}
		f.deliverTime = t
	}
	return nil
}

// maxDelay is the cluster's schedule horizon.
const maxDelay = 40 * 24 * time.Hour

// ackLog writes acknowledgement lines; safe for concurrent use.
type ackLog struct {
	mu sync.Mutex
	w  *bufio.Writer
	f  *os.File
}

func openAckLog(path string) (*ackLog, error) {
	if path == "" {
		return &ackLog{}, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &ackLog{w: bufio.NewWriter(f), f: f}, nil
}

// record writes "msgId topic queueId queueOffset", or "? ?" when the
// outcome is unknown.
func (a *ackLog) record(r client.SendResult, topic string, unknown bool) {
	if a.w == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if unknown {
		fmt.Fprintf(a.w, "%s\t%s\t?\t?\n", r.MsgID, topic)
		return
	}
	fmt.Fprintf(a.w, "%s\t%s\t%d\t%d\n", r.MsgID, r.Topic, r.QueueID, r.QueueOffset)
}

func (a *ackLog) Close() error {
	if a.f == nil {
		return nil
	}
	return errors.Join(a.w.Flush(), a.f.Sync(), a.f.Close())
}

// makeBody returns a body of size bytes that starts with the msg id.
func makeBody(id string, size int) []byte {
	b := make([]byte, max(size, len(id)))
	n := copy(b, id)
	for i := n; i < len(b); i++ {
		b[i] = 'a' + byte(i%26)
	}
	return b
}

type produceStats struct {
	ok, failed, unknown atomic.Int64
}

func produce(e *env, f produceFlags) error {
	c, err := e.connect()
	if err != nil {
		return err
	}
	defer c.Close()
	acks, err := openAckLog(f.ackLog)
	if err != nil {
		return err
	}
	var st produceStats
	var firstErr atomic.Value
	p := client.NewProducer(c, client.ProducerOptions{MaxBatch: f.batch, MaxBatchBytes: f.batchBytes, MaxInFlight: f.conc})
	prog := startProgress(e, func() string {
		return fmt.Sprintf("produced %d/%d (%d failed, %d unknown)", st.ok.Load(), f.n, st.failed.Load(), st.unknown.Load())
	})
	start := time.Now()
	for i := 0; i < f.n && e.ctx.Err() == nil; i++ {
		id := c.NewMsgID()
		body := []byte(f.body)
		if !f.bodySet {
			body = makeBody(id, f.size)
		}
		m := client.NewMessage(f.topic, body).WithID(id).WithTag(f.tag)
		if f.key != "" {
			m = m.WithKeys(f.key)
		}
		switch {
		case f.delay > 0:
			m = m.WithDelay(f.delay)
		case !f.deliverTime.IsZero():
			m = m.WithDeliverAt(f.deliverTime)
		}
		p.SendAsync(m, func(r client.SendResult, err error) {
			switch {
			case err == nil:
				st.ok.Add(1)
				acks.record(r, f.topic, false)
			case client.IsOutcomeUnknown(err):
				st.unknown.Add(1)
				acks.record(r, f.topic, true)
				firstErr.CompareAndSwap(nil, err)
			default:
				st.failed.Add(1)
				firstErr.CompareAndSwap(nil, err)
			}
		})
	}
	cerr := p.Close()
	prog.Stop()
	secs := time.Since(start).Seconds()
	if err := errors.Join(cerr, acks.Close()); err != nil {
		return err
	}
	return reportProduce(e, &st, secs, firstErr.Load())
}

func reportProduce(e *env, st *produceStats, secs float64, first any) error {
	ok, failed, unknown := st.ok.Load(), st.failed.Load(), st.unknown.Load()
	if e.json {
		if err := e.emit(map[string]any{"count": ok, "failed": failed, "unknown": unknown,
			"seconds": secs, "msgs_per_s": float64(ok) / max(secs, 1e-9)}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(e.stdout, "produced %d messages in %.2fs (%.0f msg/s), %d failed, %d outcome unknown\n",
			ok, secs, float64(ok)/max(secs, 1e-9), failed, unknown)
	}
	if failed+unknown > 0 {
		return fmt.Errorf("%d sends failed, %d with unknown outcome; first error: %v", failed, unknown, first)
	}
	return e.ctx.Err()
}
