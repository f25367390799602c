package transport_test

import (
	"context"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/raftmq/raftmq/internal/testseed"
	"github.com/raftmq/raftmq/message"
	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/transport"
	"github.com/raftmq/raftmq/transport/transporttest"
)

// fillQueue stores n messages of random sizes and properties in queue 0 of
// topic (created with one queue) and returns them as sent.
func fillQueue(t testing.TB, s *transporttest.Server, topic string, n int, rng *rand.Rand, bodySize func() int) []*pb.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := dial(t, s.Addr)
	if _, err := c.CreateTopic(ctx, &pb.CreateTopicRequest{Name: topic, Queues: 1}); err != nil {
		t.Fatal(err)
	}
	var sent []*pb.Message
	for len(sent) < n {
		req := &pb.SendRequest{}
		for range min(256, n-len(sent)) {
			m := &pb.Message{Topic: topic, QueueId: 0, Flag: rng.Int31n(8), Body: make([]byte, bodySize()),
				BornTimestamp: 1 + rng.Int63n(1<<40), BornHost: fmt.Sprintf("10.%d.%d.%d:%d", rng.Intn(256), rng.Intn(256), rng.Intn(256), rng.Intn(65536))}
			rng.Read(m.Body)
			if rng.Intn(4) > 0 {
				m.Properties = append(m.Properties, &pb.Property{Key: message.PropertyUniqKey, Value: fmt.Sprintf("ID-%d", len(sent)+len(req.Messages))})
			}
			if rng.Intn(2) == 0 {
				m.Properties = append(m.Properties, &pb.Property{Key: message.PropertyTags, Value: fmt.Sprint("t", rng.Intn(3))},
					&pb.Property{Key: "user", Value: string(rune('a' + rng.Intn(26)))})
			}
			req.Messages = append(req.Messages, m)
		}
		resp, err := c.Send(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range resp.GetResults() {
			if r.GetErrorCode() != 0 {
				t.Fatalf("send: %v", r)
			}
			sent = append(sent, req.Messages[i])
		}
	}
	return sent
}

// A pull answered as records carries exactly what the per-message answer
// carries, for the same request: every field, in the same order, and the
// next offset; the records decode whole (body CRC checked).
func TestPullRecordsMatchMessages(t *testing.T) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewSource(seed))
	s := transporttest.StartT(t)
	sent := fillQueue(t, s, "R", 700, rng, func() int { return rng.Intn(3000) })
	c := dial(t, s.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	total := 0
	for off := int64(0); off < int64(len(sent)); {
		req := &pb.PullRequest{Topic: "R", QueueId: 0, Offset: off, MaxMessages: 1 + rng.Int31n(300), Tag: []string{"", "t1", "t0||t2"}[rng.Intn(3)]}
		old, err := c.Pull(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		req.Records = true
		rec, err := c.Pull(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if len(rec.GetMessages()) != 0 || rec.GetStatus() != old.GetStatus() || rec.GetNextOffset() != old.GetNextOffset() ||
			rec.GetMinOffset() != old.GetMinOffset() || rec.GetMaxOffset() != old.GetMaxOffset() {
			t.Fatalf("offset %d: records answer %v, messages answer %v", off, rec, old)
		}
		b := rec.GetRecords()
		for i, want := range old.GetMessages() {
			r, err := message.DecodeRecord(b)
			if err != nil {
				t.Fatalf("offset %d record %d: %v", off, i, err)
			}
			b = b[r.Size:]
			if got := storedOf(&r); !equalStored(got, want) {
				t.Fatalf("offset %d record %d:\n got %v\nwant %v", off, i, headerOf(got), headerOf(want))
			}
			total++
		}
		if len(b) != 0 {
			t.Fatalf("offset %d: %d bytes after the last record", off, len(b))
		}
		if old.GetNextOffset() <= off {
			t.Fatalf("offset %d: next offset %d", off, old.GetNextOffset())
		}
		off = old.GetNextOffset()
	}
	if total == 0 {
		t.Fatal("no message compared")
	}
}

// storedOf renders a decoded record as the server's per-message answer.
func storedOf(r *message.Record) *pb.StoredMessage {
	m := store.Message{Topic: string(r.Topic), QueueID: r.QueueID, QueueOffset: r.QueueOffset, PhysicalOffset: r.PhysicalOffset,
		Size: r.Size, Flag: r.Flag, SysFlag: r.SysFlag, BornTimestamp: r.BornTimestamp, BornHost: r.BornHost,
		StoreTimestamp: r.StoreTimestamp, StoreHost: r.StoreHost, ReconsumeTimes: r.ReconsumeTimes,
		PreparedTxOffset: r.PreparedTxOffset, BodyCRC: r.BodyCRC, Body: r.Body, Properties: r.Properties}
	return transport.FromStoreMessage(m)
}

func equalStored(a, b *pb.StoredMessage) bool { return proto.Equal(a, b) }

// headerOf is m without its body (for failure messages), plus the body's length.
func headerOf(m *pb.StoredMessage) string {
	h := proto.Clone(m).(*pb.StoredMessage)
	h.Body = nil
	return fmt.Sprintf("%v body=%d bytes", h, len(m.GetBody()))
}

// FormatHostPort renders what ParseHostPort reads, for every octet and the
// port range.
func TestFormatHostPortRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(testseed.Seed(t)))
	for range 2000 {
		h := message.HostPort{IP: [4]byte{byte(rng.Intn(256)), byte(rng.Intn(256)), byte(rng.Intn(256)), byte(rng.Intn(256))}, Port: rng.Int31n(65536)}
		s := h.String()
		want := fmt.Sprintf("%d.%d.%d.%d:%d", h.IP[0], h.IP[1], h.IP[2], h.IP[3], h.Port)
		got, err := message.ParseHostPort(s)
		if s != want || err != nil || got != h {
			t.Fatalf("%v: formatted %q (want %q), parsed back %v, %v", h, s, want, got, err)
		}
	}
}
