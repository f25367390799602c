package store

// API CONTRACT, written first so fsm/, node/ and transport/ can be built in
// parallel with the store. Names and signatures are fixed: add, don't change.

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/vfs"
)

var (
	ErrClosed          = errors.New("store: closed")
	ErrAlreadyApplied  = errors.New("store: raft index already applied")
	ErrBadTopic        = errors.New("store: illegal topic name")
	ErrNoSuchTopic     = errors.New("store: no such topic")
	ErrBadQueue        = errors.New("store: queue id out of range")
	ErrMessageTooLarge = errors.New("store: message body too large")
	ErrPropsTooLarge   = errors.New("store: properties too large")
	ErrBadOffset       = errors.New("store: offset out of range")
	ErrNotFound        = errors.New("store: not found")
	ErrTopicExists     = errors.New("store: topic exists")
)

// Config of a store. DefaultConfig gives RocketMQ's defaults.
type Config struct {
	Dir                  string // <data>/store
	CommitLogFileSize    int64  // 1 GiB
	ConsumeQueueFileSize int64  // 6,000,000 (300,000 units)
	IndexMaxHashSlots    int    // 5,000,000
	IndexMaxIndexes      int    // 20,000,000
	MaxMessageSize       int    // 4 MiB body
	AutoCreateTopics     bool   // a message to an unknown topic creates it with DefaultQueues
	DefaultQueues        int32  // 8
	MaxQueues            int32  // 1024
	FlushInterval        time.Duration
	PreTouch             bool // allocator pre-touches the next segments
	UseAllocator         bool
	// Retention (RocketMQ defaults): 72 h, 75 %, 85 %, 90 %.
	FileReservedTime      time.Duration
	DiskMaxUsedSpaceRatio int
	CleanForciblyRatio    int
	DiskWarningRatio      int
	Now                   func() time.Time // clock seam (retention only)
	Logger                hclog.Logger
}

// EntryHeader carries what the Raft entry fixes for every byte it produces.
type EntryHeader struct {
	RaftIndex      uint64
	Term           uint64
	StoreTimestamp int64 // chosen by the leader, made monotonic by the FSM
	StoreHost      commitlog.HostPort
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
	Flag             int32
	SysFlag          int32
	BornTimestamp    int64
	BornHost         commitlog.HostPort
	StoreTimestamp   int64
	StoreHost        commitlog.HostPort
	ReconsumeTimes   int32
	PreparedTxOffset int64
	BodyCRC          uint32
	Body             []byte
	Properties       []byte
}

// TopicConfig is a topic's replicated configuration.
type TopicConfig struct {
	Name   string
	Queues int32
	Perm   int32
}

// OffsetCommit is one consumer-group offset to store.
type OffsetCommit struct {
	Group   string
	Topic   string
	QueueID int32
	Offset  int64
}

// Stats is a point-in-time view for metrics.
type Stats struct {
	MinOffset, MaxOffset, ConfirmOffset, FlushedOffset int64
	AppliedIndex, AppliedTerm                          uint64
	CheckpointOffset                                   int64
	Messages, Bytes, Entries                           uint64
	RecoveryDuration                                   time.Duration
	RecoveryMode                                       string // "normal" or "abnormal"
	Topics, Queues                                     int
}

// Store is the single-node message store driven by the Raft FSM.
type Store struct{}

func DefaultConfig(dir string) Config                       { panic("not implemented yet") }
func (c Config) Validate() error                            { panic("not implemented yet") }
func Open(fs vfs.FS, cfg Config) (*Store, error)            { panic("not implemented yet") }
func (s *Store) Close() error                               { panic("not implemented yet") }
func (s *Store) Applied() (index, term uint64)              { panic("not implemented yet") }
func (s *Store) ConfirmOffset() int64                       { panic("not implemented yet") }
func (s *Store) ValidateMessage(m *commitlog.Message) error { panic("not implemented yet") }

// AppendMessages writes one entry's messages; results gets one PutResult per
// message. ErrAlreadyApplied if h.RaftIndex <= Applied().
func (s *Store) AppendMessages(h EntryHeader, msgs []commitlog.Message, results []PutResult) ([]PutResult, error) {
	panic("not implemented yet")
}
func (s *Store) CreateTopic(h EntryHeader, t TopicConfig) error { panic("not implemented yet") }
func (s *Store) DeleteTopic(h EntryHeader, name string) error   { panic("not implemented yet") }
func (s *Store) CommitOffsets(h EntryHeader, commits []OffsetCommit) error {
	panic("not implemented yet")
}

// MarkApplied records an entry that changes no state (no-op, rejected
// command) so appliedIndex still advances durably.
func (s *Store) MarkApplied(h EntryHeader) error { panic("not implemented yet") }

func (s *Store) GetMessages(topic string, queueID int32, offset int64, maxNum, maxBytes int, tag string) (GetResult, error) {
	panic("not implemented yet")
}

// WaitMessage blocks until the queue's max offset exceeds offset or ctx ends.
func (s *Store) WaitMessage(ctx context.Context, topic string, queueID int32, offset int64) error {
	panic("not implemented yet")
}
func (s *Store) MinOffset(topic string, queueID int32) (int64, error) { panic("not implemented yet") }
func (s *Store) MaxOffset(topic string, queueID int32) (int64, error) { panic("not implemented yet") }

// OffsetByTime: upper=false is RocketMQ's LOWER boundary, true UPPER.
func (s *Store) OffsetByTime(topic string, queueID int32, ts int64, upper bool) (int64, error) {
	panic("not implemented yet")
}
func (s *Store) LookupByOffset(phy int64) (Message, error)            { panic("not implemented yet") }
func (s *Store) LookupByMsgID(topic, msgID string) ([]Message, error) { panic("not implemented yet") }
func (s *Store) QueryByKey(topic, key string, max int, begin, end int64) ([]Message, error) {
	panic("not implemented yet")
}
func (s *Store) Topics() []TopicConfig                 { panic("not implemented yet") }
func (s *Store) Topic(name string) (TopicConfig, bool) { panic("not implemented yet") }
func (s *Store) ConsumerOffset(group, topic string, queueID int32) (int64, bool) {
	panic("not implemented yet")
}

// Flush makes everything applied so far durable and writes the checkpoint.
func (s *Store) Flush() error { panic("not implemented yet") }
func (s *Store) Stats() Stats { panic("not implemented yet") }

// Snapshot is the O(1) capture the FSM takes on its goroutine: everything a
// follower needs besides the commitlog bytes in [MinOffset, ConfirmOffset).
type Snapshot struct {
	AppliedIndex  uint64
	AppliedTerm   uint64
	ConfirmOffset int64
	MinOffset     int64
	Meta          []byte // topics, consumer offsets, queue table (encoded by the store)
}

// SegmentFile is one commitlog segment as a snapshot refers to it.
type SegmentFile struct {
	Path  string // absolute path of the live segment
	Start int64
	Size  int64 // the segment's file size
}

// CaptureSnapshot returns the state as of the last applied entry; O(metadata).
func (s *Store) CaptureSnapshot() Snapshot { panic("not implemented yet") }

// FlushTo makes the commitlog durable at least up to offset and writes a
// checkpoint covering it (Persist calls it before Raft may compact).
func (s *Store) FlushTo(offset int64) error { panic("not implemented yet") }

// SegmentFiles lists the segments holding [MinOffset, upTo).
func (s *Store) SegmentFiles(upTo int64) []SegmentFile { panic("not implemented yet") }

// InstallSnapshot replaces the store in cfg.Dir by the snapshot: segments
// yields each segment's start offset and a reader of its bytes up to
// min(segment end, snap.ConfirmOffset). It stages the new files beside the
// store, then renames them into place and writes checkpoint and meta; the
// store must be closed first, and is opened again with Open afterwards, which
// rebuilds consume queues and index from the commitlog.
func InstallSnapshot(fs vfs.FS, cfg Config, snap Snapshot, next func() (start int64, r io.Reader, ok bool, err error)) error {
	panic("not implemented yet")
}
