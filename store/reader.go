package store

import (
	"context"

	"github.com/raftmq/raftmq/message"
)

// Reader is the read side of a Store: what the API layer serves from a
// node's local, committed state. It lets packages above store (transport)
// depend on reads alone instead of the whole engine, and tests serve them
// from a twin. *Store implements it.
type Reader interface {
	// GetMessages copies up to maxNum messages (and about maxBytes) of a
	// queue from offset, filtered by tag ("" or "*": all).
	GetMessages(topic string, queueID int32, offset int64, maxNum, maxBytes int, tag string) (GetResult, error)
	// ReadMessages is GetMessages without copies: fn sees each record in
	// place, valid only during the call.
	ReadMessages(topic string, queueID int32, offset int64, maxNum, maxBytes int, tag string, fn func(*message.Record) error) (GetResult, error)
	// WaitMessage blocks until the queue holds a message at offset, the
	// store closes, or ctx ends.
	WaitMessage(ctx context.Context, topic string, queueID int32, offset int64) error
	// MinOffset and MaxOffset are a queue's logical bounds.
	MinOffset(topic string, queueID int32) (int64, error)
	MaxOffset(topic string, queueID int32) (int64, error)
	// OffsetByTime is the first (upper: last) queue offset stored at or
	// after (before) ts, in Unix ms.
	OffsetByTime(topic string, queueID int32, ts int64, upper bool) (int64, error)
	// LookupByOffset reads the message at a commitlog offset.
	LookupByOffset(phy int64) (Message, error)
	// LookupByMsgID and QueryByKey search the hash index.
	LookupByMsgID(topic, msgID string) ([]Message, error)
	QueryByKey(topic, key string, max int, begin, end int64) ([]Message, error)
	// Topics and Topic describe the topics.
	Topics() []TopicConfig
	Topic(name string) (TopicConfig, bool)
	// ConsumerOffset is a group's committed offset for a queue.
	ConsumerOffset(group, topic string, queueID int32) (int64, bool)
	// GroupProgress is the committed offset, queue end and lag per queue of
	// the groups and topics asked for ("": all).
	GroupProgress(group, topic string) []GroupQueue
}

var _ Reader = (*Store)(nil)
