package store

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testseed"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/vfs"
)

// testSeed is the shared seed source (flag -seed, RAFTMQ_SEED, clock).
func testSeed(t testing.TB) int64 { return testseed.Seed(t) }

// smallConfig makes segment rolls, consume-queue rolls and index rolls
// happen within a few hundred messages.
func smallConfig(dir string) Config {
	c := DefaultConfig(dir)
	c.CommitLogFileSize = 64 << 10
	c.ConsumeQueueFileSize = 20 * 64
	c.IndexMaxHashSlots = 16
	c.IndexMaxIndexes = 128
	c.MaxMessageSize = 8 << 10
	c.FlushInterval = time.Hour // tests flush explicitly
	c.FlushBytes = math.MaxInt64
	c.CleanInterval = time.Hour
	c.UseAllocator = false
	c.PreTouch = false
	return c
}

func mustOpen(t testing.TB, fsys vfs.FS, cfg Config) *Store {
	t.Helper()
	s, err := Open(fsys, cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return s
}

// testMessage builds a message whose body names it, with a key and a tag.
func testMessage(topic string, queue int32, n int, rng *rand.Rand) message.Message {
	body := fmt.Appendf(nil, "msg-%d-", n)
	if rng != nil {
		extra := make([]byte, rng.Intn(600))
		rng.Read(extra)
		body = append(body, extra...)
	}
	props, err := message.EncodeProperties(
		message.Property{Key: message.PropertyKeys, Value: fmt.Sprintf("k%d common", n)},
		message.Property{Key: message.PropertyUniqKey, Value: fmt.Sprintf("U%08d", n)},
		message.Property{Key: message.PropertyTags, Value: []string{"red", "blue"}[n%2]},
	)
	if err != nil {
		panic(err)
	}
	return message.Message{Topic: topic, QueueID: queue, BornTimestamp: int64(n), Body: body, Properties: props}
}

func header(index uint64) EntryHeader {
	return EntryHeader{RaftIndex: index, Term: 1, StoreTimestamp: 1_700_000_000_000 + int64(index)*10, StoreHost: message.HostPort{IP: [4]byte{127, 0, 0, 1}, Port: 7001}}
}
