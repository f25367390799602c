package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sort"
	"strings"
	"sync"

	"github.com/raftmq/raftmq/message"
	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
)

// DefaultIdempotenceWindow is Options.IdempotenceWindow's default: the
// sequences a raftmq cluster remembers per producer (its dedup window).
const DefaultIdempotenceWindow = 4096

// sequencer stamps messages with this client's producer id and a sequence
// (the PSEQ property) and keeps fewer than window sequences outstanding:
// the cluster remembers the newest window sequences per producer, so a
// sequence sent while fewer than window are outstanding can never be
// refused as older than the window, and a retry of it is answered with the
// first copy's result.
type sequencer struct {
	producer string
	window   uint64

	mu      sync.Mutex
	next    uint64
	blocks  []seqBlock    // outstanding and finished blocks, ascending; head first
	changed chan struct{} // closed when the head block finishes
}

// seqBlock is the sequences [base, base+n) of one Send.
type seqBlock struct {
	base, n uint64
	done    bool
}

func newSequencer(window int) *sequencer {
	var id [8]byte
	_, _ = rand.Read(id[:])
	return &sequencer{producer: strings.ToUpper(hex.EncodeToString(id[:])), window: uint64(window),
		changed: make(chan struct{})}
}

// acquire reserves n sequences, waiting while taking them would put the
// oldest outstanding one window or more sequences back. A block larger than
// the window goes alone.
func (s *sequencer) acquire(ctx context.Context, n int) (uint64, error) {
	s.mu.Lock()
	for len(s.blocks) > 0 && s.next+uint64(n) > s.blocks[0].base+s.window {
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		s.mu.Lock()
	}
	base := s.next
	s.next += uint64(n)
	s.blocks = append(s.blocks, seqBlock{base: base, n: uint64(n)})
	s.mu.Unlock()
	return base, nil
}

// release ends the block at base: answered, or given up on.
func (s *sequencer) release(base uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// blocks is ascending by base: with thousands of Sends outstanding a
	// scan from the head per release cost more than the Send's encoding.
	i := sort.Search(len(s.blocks), func(i int) bool { return s.blocks[i].base >= base })
	if i < len(s.blocks) && s.blocks[i].base == base {
		s.blocks[i].done = true
	}
	head := 0
	for head < len(s.blocks) && s.blocks[head].done {
		head++
	}
	if head == 0 {
		return
	}
	s.blocks = s.blocks[head:] // append reallocates (and drops the finished) when it runs out of room
	close(s.changed)
	s.changed = make(chan struct{})
}

// stamp adds PSEQ to the messages that have none, numbering them from
// base.
func (s *sequencer) stamp(msgs []*pb.Message, base uint64) {
	for _, m := range msgs {
		if hasProducerSeq(m) {
			continue
		}
		v := string(message.AppendProducerSeq(make([]byte, 0, len(s.producer)+21), s.producer, base))
		m.Properties = append(m.Properties, &pb.Property{Key: message.PropertyProducerSeq, Value: v})
		base++
	}
}

func hasProducerSeq(m *pb.Message) bool {
	for _, p := range m.GetProperties() {
		if p.GetKey() == message.PropertyProducerSeq {
			return true
		}
	}
	return false
}

// unstamped counts the messages without a PSEQ.
func unstamped(msgs []*pb.Message) int {
	n := 0
	for _, m := range msgs {
		if !hasProducerSeq(m) {
			n++
		}
	}
	return n
}

// Prepare returns msgs as Send will send them: each with an id (UNIQ_KEY)
// and, unless Options.DisableIdempotence, this client's producer id and a
// fresh sequence (the PSEQ property). Sending a prepared message again,
// after an error that leaves its outcome unknown, stores it at most once:
// the cluster answers a repeat with the first copy's result. A prepared
// message should be sent at once: a sequence that waits while this client
// sends Options.IdempotenceWindow newer ones may be refused as too old
// (never stored twice).
func (c *Client) Prepare(msgs ...Message) []Message {
	out := make([]Message, len(msgs))
	var base uint64
	if c.seq != nil {
		c.seq.mu.Lock()
		base = c.seq.next
		c.seq.next += uint64(len(msgs))
		c.seq.mu.Unlock()
	}
	for i, m := range msgs {
		if m.ID == "" {
			m.ID = c.ids.Next()
		}
		if c.seq != nil {
			if _, ok := m.Properties[message.PropertyProducerSeq]; !ok {
				m = m.WithProperty(message.PropertyProducerSeq, string(message.AppendProducerSeq(nil, c.seq.producer, base)))
				base++
			}
		}
		out[i] = m
	}
	return out
}

// ProducerID is the producer id this client stamps on its messages ("" with
// Options.DisableIdempotence).
func (c *Client) ProducerID() string {
	if c.seq == nil {
		return ""
	}
	return c.seq.producer
}
