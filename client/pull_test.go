package client

import (
	"context"
	"fmt"
	"math/rand"
	"reflect"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/raftmq/raftmq/internal/testseed"
	"github.com/raftmq/raftmq/message"
	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
	"github.com/raftmq/raftmq/transport/transporttest"
)

// Pull over a real server decodes the records answer into the same
// messages as the older per-message answer (what a server that predates
// PullRequest.records sends), and PullBatch.Next walks the same records.
func TestPullRecordsAndOlderAnswerAgree(t *testing.T) {
	rng := rand.New(rand.NewSource(testseed.Seed(t)))
	s, ctx, c := withTopic(t, "P", 1)
	var msgs []Message
	for i := range 300 {
		m := NewMessage("P", make([]byte, rng.Intn(2000))).WithQueue(0)
		rng.Read(m.Body)
		if rng.Intn(2) == 0 {
			m = m.WithKeys(fmt.Sprint("k", i), "other").WithTag(fmt.Sprint("t", rng.Intn(3))).WithProperty("p", fmt.Sprint(i))
		}
		msgs = append(msgs, m)
	}
	sent, err := c.Send(ctx, msgs...)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(s.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	raw := pb.NewRaftMQClient(cc)

	got := 0
	for off := int64(0); off < int64(len(msgs)); {
		req := PullRequest{Topic: "P", QueueID: 0, Offset: off, MaxMessages: 1 + rng.Int31n(100)}
		r, err := c.Pull(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		older, err := raw.Pull(ctx, &pb.PullRequest{Topic: "P", QueueId: 0, Offset: off, MaxMessages: req.MaxMessages})
		if err != nil || len(older.GetMessages()) == 0 || len(older.GetRecords()) != 0 {
			t.Fatalf("older answer: %v, %d messages, %d record bytes", err, len(older.GetMessages()), len(older.GetRecords()))
		}
		ob := &PullBatch{Status: older.GetStatus(), NextOffset: older.GetNextOffset(), stored: older.GetMessages()}
		want, err := ob.Messages()
		if err != nil {
			t.Fatal(err)
		}
		if want2 := fromStoredList(older.GetMessages()); !reflect.DeepEqual(nilEmptyBodies(want), nilEmptyBodies(want2)) {
			t.Fatalf("offset %d: older answer converted two ways differs:\n%+v\n%+v", off, want[0], want2[0])
		}
		if r.NextOffset != older.GetNextOffset() || r.Status != older.GetStatus() || !reflect.DeepEqual(nilEmptyBodies(r.Messages), nilEmptyBodies(want)) {
			t.Fatalf("offset %d: records answer (next %d, %d msgs) differs from the older one (next %d, %d msgs)",
				off, r.NextOffset, len(r.Messages), older.GetNextOffset(), len(want))
		}
		for i, m := range r.Messages {
			k := int(m.QueueOffset)
			if m.MsgID != sent[k].MsgID || string(m.Body) != string(msgs[k].Body) || m.Tags != msgs[k].Tag {
				t.Fatalf("offset %d message %d: %+v, sent %+v", off, i, m, sent[k])
			}
		}
		b, err := c.PullBatch(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; ; i++ {
			rec, ok, err := b.Next()
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				if i != len(want) {
					t.Fatalf("offset %d: batch had %d records, want %d", off, i, len(want))
				}
				break
			}
			if i >= len(want) || rec.QueueOffset != want[i].QueueOffset || string(rec.Body) != string(want[i].Body) {
				t.Fatalf("offset %d: batch record %d differs", off, i)
			}
		}
		got += len(r.Messages)
		off = r.NextOffset
	}
	if got != len(msgs) {
		t.Fatalf("read %d messages, sent %d", got, len(msgs))
	}
}

// A damaged record in the answer is an error, not a silently wrong message.
func TestPullBatchDamagedRecord(t *testing.T) {
	_, ctx, c := withTopic(t, "D", 1)
	if _, err := c.Send(ctx, NewMessage("D", []byte("payload")).WithQueue(0)); err != nil {
		t.Fatal(err)
	}
	b, err := c.PullBatch(ctx, PullRequest{Topic: "D", QueueID: 0})
	if err != nil || len(b.records) == 0 {
		t.Fatalf("pull: %v, %d record bytes", err, len(b.records))
	}
	b.records[message.OffBody+2] ^= 1 // inside the body
	if _, err := b.Messages(); err == nil {
		t.Fatal("a flipped body bit was not detected")
	}
}

// nilEmptyBodies makes empty bodies nil (an empty bytes field decodes as
// either), so DeepEqual compares content.
func nilEmptyBodies(ms []ReceivedMessage) []ReceivedMessage {
	out := append([]ReceivedMessage(nil), ms...)
	for i := range out {
		if len(out[i].Body) == 0 {
			out[i].Body = nil
		}
	}
	return out
}

// withTopic starts a real server with topic (queues queues) and a client on
// it; the context ends with the test (30 s at most).
func withTopic(t *testing.T, topic string, queues int32) (*transporttest.Server, context.Context, *Client) {
	t.Helper()
	s := transporttest.StartT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	c, err := New(ctx, []string{s.Addr}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.CreateTopic(ctx, topic, queues); err != nil {
		t.Fatal(err)
	}
	return s, ctx, c
}
