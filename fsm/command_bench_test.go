package fsm

import (
	"bytes"
	"testing"

	"github.com/raftmq/raftmq/message"
)

func benchBatch() Command {
	c := Command{Type: CmdMessageBatch, LeaderTimestamp: 1}
	for i := 0; i < 64; i++ {
		c.Messages = append(c.Messages, message.Message{Topic: "bench", QueueID: int32(i % 8), Body: bytes.Repeat([]byte{'x'}, 1024)})
	}
	return c
}

// BenchmarkCopyBaseline copies an encoded 64 × 1 KiB batch: the floor any
// codec pays (compare Encode/Decode against it).
func BenchmarkCopyBaseline(b *testing.B) {
	c := benchBatch()
	data, _ := c.Encode(nil)
	dst := make([]byte, len(data))
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		copy(dst, data)
	}
}

func BenchmarkEncodeBatch(b *testing.B) {
	c := benchBatch()
	buf, _ := c.Encode(nil)
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		buf, _ = c.Encode(buf[:0])
	}
}

func BenchmarkDecodeBatch(b *testing.B) {
	c := benchBatch()
	data, _ := c.Encode(nil)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := DecodeCommand(data); err != nil {
			b.Fatal(err)
		}
	}
}
