package store

import (
	"github.com/raftmq/raftmq/meta"
	"time"

	"github.com/raftmq/raftmq/message"
)

// EntryHeader carries what the Raft entry fixes for every byte it produces.
type EntryHeader struct {
	RaftIndex      uint64
	Term           uint64
	StoreTimestamp int64 // chosen by the leader, made monotonic by the FSM
	StoreHost      message.HostPort
}

// PutResult is the per-message outcome of AppendMessages.
type PutResult struct {
	Topic          string
	QueueID        int32
	QueueOffset    int64
	PhysicalOffset int64
	Size           int32
	MsgID          string // UNIQ_KEY property if present, else the offset msg id
	OffsetMsgID    string // hex(store host + physical offset), 32 chars
	StoreTimestamp int64
	Err            error // deterministic per-message failure (nothing written for it)
	// Duplicate: the message repeats a producer sequence (PSEQ) stored
	// before; nothing was written and the fields are the first copy's.
	Duplicate bool
}

// GetStatus mirrors RocketMQ's GetMessageStatus.
type GetStatus int

const (
	Found GetStatus = iota
	NoMatchedMessage
	OffsetTooSmall
	OffsetOverflowOne
	OffsetOverflowBadly
	NoMatchedLogicQueue
	NoMessageInQueue
)

var statusNames = [...]string{"FOUND", "NO_MATCHED_MESSAGE", "OFFSET_TOO_SMALL", "OFFSET_OVERFLOW_ONE",
	"OFFSET_OVERFLOW_BADLY", "NO_MATCHED_LOGIC_QUEUE", "NO_MESSAGE_IN_QUEUE"}

func (s GetStatus) String() string {
	if s < 0 || int(s) >= len(statusNames) {
		return "UNKNOWN"
	}
	return statusNames[s]
}

// GetResult is the answer to GetMessages.
type GetResult struct {
	Status     GetStatus
	NextOffset int64
	MinOffset  int64
	MaxOffset  int64
	Messages   []Message
}

// Message is a stored message as read back (bytes copied out of the mapping).
type Message struct {
	Topic            string
	QueueID          int32
	QueueOffset      int64
	PhysicalOffset   int64
	Size             int32
	Flag             int32
	SysFlag          int32
	BornTimestamp    int64
	BornHost         message.HostPort
	StoreTimestamp   int64
	StoreHost        message.HostPort
	ReconsumeTimes   int32
	PreparedTxOffset int64
	BodyCRC          uint32
	Body             []byte
	Properties       []byte
}

// Property returns a property of the message.
func (m *Message) Property(key string) (string, bool) {
	v, ok := message.GetProperty(m.Properties, key)
	return string(v), ok
}

// TopicConfig is a topic's replicated configuration.
type TopicConfig = meta.TopicConfig

// OffsetCommit is one consumer-group offset to store.
type OffsetCommit = meta.OffsetCommit

// Stats is a point-in-time view for metrics.
type Stats struct {
	MinOffset, MaxOffset, ConfirmOffset, FlushedOffset int64
	// TouchedOffset: the service goroutine has faulted in the commitlog
	// below it, ahead of the writer (Config.TouchAhead).
	TouchedOffset             int64
	AppliedIndex, AppliedTerm uint64
	CheckpointOffset          int64
	Messages, Bytes, Entries  uint64
	Flushes                   uint64
	LastFlushDuration         time.Duration
	RecoveryDuration          time.Duration
	RecoveryMode              string // "fresh", "normal" or "abnormal"
	Topics, Queues            int
	SegmentsDeleted           uint64
	// Corruptions counts reads refused because what they would serve is
	// damaged (a record, its entry's CRC32C, a consume-queue unit).
	Corruptions uint64
	// RebuildPending: a read found a consume queue or the index damaged;
	// the next Open rebuilds them from the commitlog.
	RebuildPending bool
	// Producers is the size of the producer table (idempotent producers
	// seen within the expiry); DedupHits counts the messages answered as
	// duplicates of a stored producer sequence since Open.
	Producers int
	DedupHits uint64
	// Delivered counts the scheduled messages DeliverDue stored in their
	// real topics since Open.
	Delivered uint64
	// ScheduledPending is the number of scheduled messages not yet due.
	ScheduledPending int64
}

// Snapshot is the O(1) capture the FSM takes on its goroutine: everything a
// follower needs besides the commitlog bytes in [MinOffset, ConfirmOffset).
type Snapshot struct {
	AppliedIndex    uint64
	AppliedTerm     uint64
	ConfirmOffset   int64
	MinOffset       int64
	LastEntryOffset int64 // start of the entry ending at ConfirmOffset (-1: none)
	StoreTimestamp  int64 // store time of that entry
	Meta            []byte
}

// SegmentFile is one commitlog segment as a snapshot refers to it.
type SegmentFile struct {
	Path  string // path of the live segment
	Start int64
	Size  int64 // the segment's file size
}
