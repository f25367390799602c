package store

import (
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/raftmq/raftmq/message"
)

// Config of a store. DefaultConfig gives RocketMQ's defaults. Every replica
// of a cluster must run with the same CommitLogFileSize, AutoCreateTopics,
// DefaultQueues, MaxQueues and MaxTotalQueues: they decide bytes, offsets
// and which topics exist.
//
// The node reads the fields from the [store] table of its TOML file, each
// under its field name (CommitLogFileSize = 67108864); Validate names the
// key of the first bad value.
type Config struct {
	Dir                  string // <data>/store
	CommitLogFileSize    int64  // 1 GiB: the size of every commitlog segment, preallocated whole
	ConsumeQueueFileSize int64  // 6,000,000 (300,000 units of 20 bytes) per consume-queue file
	// PreallocateSegments is how many commitlog segments the allocator
	// prepares (creates, preallocates, maps, and with PreTouch faults in)
	// ahead of the one being written: 1 (RocketMQ's "next-next" file), 0
	// for none (a roll then creates its segment inline, not pre-touched), at most
	// MaxPreallocateSegments. Ignored without UseAllocator.
	PreallocateSegments int
	IndexMaxHashSlots   int   // 5,000,000
	IndexMaxIndexes     int   // 20,000,000
	MaxMessageSize      int   // 4 MiB body
	AutoCreateTopics    bool  // a message to an unknown topic creates it with DefaultQueues
	DefaultQueues       int32 // 8
	MaxQueues           int32 // 1024 per topic
	// MaxTotalQueues bounds the queues of all topics together (32,768):
	// every queue maps at least one consume-queue file, and the kernel
	// allows a process about 65,000 mappings (vm.max_map_count), so a
	// stream of auto-created topics would otherwise end in failed mmaps on
	// every replica at once. Creating or growing past it is refused
	// (ErrQueueLimit).
	MaxTotalQueues int
	FlushInterval  time.Duration // commitlog, consume queues and checkpoint: 1 s
	// FlushBytes flushes sooner, once this many commitlog bytes wait (64
	// MiB; checked every FlushInterval/10, at most every 100 ms). It was 4
	// MiB while one msync wrote a flush's whole range at once, queued on a
	// disk all nodes of a cluster may share ahead of Raft's log fsyncs.
	// Since a flush writes a chunk at a time (mmap's Flush), each flush's
	// fixed cost (checkpoint write and sync, consume queues) is what is
	// left: three local nodes at 33k msgs/s open loop
	// (A_ARGS="--config fb4m.toml" scripts/openloop-ab.sh N N CLI 33000 3 2),
	// client p99 7.0-8.3 ms (median 7.4) at 4 MiB, 4.6-7.5 (6.2) at 64 MiB;
	// the leader's fsm.applyBatch p99 1.9-3.0 against 0.5-0.8 ms.
	FlushBytes int64
	// IndexFlushInterval is how often the periodic flush msyncs the index
	// too (10 s; Flush and Close always do). Every message updates a
	// random hash slot, so a 1 s flush rewrote up to the whole 20 MB slot
	// table each second; between index flushes the checkpoint keeps the
	// index state of the last one, and recovery after a crash re-indexes
	// the entries since (at most this long's worth).
	IndexFlushInterval time.Duration
	CleanInterval      time.Duration
	// PreTouch makes the allocator fault in the next segments ahead of
	// time (off by default). On Linux 6.x / ext4 it costs more than it
	// saves: the first write into a pre-touched page ran at about half the
	// speed of a write into an untouched one (BenchmarkFirstWrite in mmap:
	// 1.0 against 1.7-2.1 GB/s), and at each 1 GiB roll every node of a
	// cluster pre-touched its next segment at once, about 3 s of mostly
	// system CPU that stalled sends on a 2-core machine for up to 2 s.
	PreTouch bool
	// TouchAhead is how many commitlog bytes past the write offset the
	// store's service goroutine keeps faulted in (0, the default: none),
	// looked at every flush poll. It was on (32 MiB) while the commitlog
	// was written by stores into the mapping, whose first write into a page
	// of a fresh segment made the kernel zero-fill the whole read-around
	// window (read_ahead_kb, 8 MiB on the machine measured) on the apply
	// path. The commitlog is now written with pwrite (mmap.WriteAt), which
	// neither faults nor reads around; with it, touching ahead only cost
	// time: three local nodes at 16k msgs/s open loop
	// (B_ARGS="--config touch.toml" scripts/openloop-ab.sh N N CLI 16000 3 2)
	// had client p99s of 17-98 ms (median 25) without and 36-64 ms
	// (median 52) with 32 MiB, saturated 44.9k/38.9k against 35.6k/39.4k.
	TouchAhead   int64
	UseAllocator bool
	// Retention (RocketMQ defaults): 72 h, 75 %, 85 %, 90 %.
	FileReservedTime      time.Duration
	DiskMaxUsedSpaceRatio int
	CleanForciblyRatio    int
	DiskWarningRatio      int
	Now                   func() time.Time // clock seam (retention only)
	Logger                hclog.Logger
	// OnFailure, if set, is called once when the store fails closed (a
	// sync failed: see ErrFailedClosed), so its owner can stop serving and
	// have recovery run from disk.
	OnFailure func(error) `toml:"-"`
}

// DefaultConfig returns RocketMQ's defaults for a store in dir.
func DefaultConfig(dir string) Config {
	return Config{
		Dir:                   dir,
		CommitLogFileSize:     1 << 30,
		ConsumeQueueFileSize:  6_000_000,
		PreallocateSegments:   1,
		IndexMaxHashSlots:     5_000_000,
		IndexMaxIndexes:       20_000_000,
		MaxMessageSize:        4 << 20,
		AutoCreateTopics:      true,
		DefaultQueues:         8,
		MaxQueues:             1024,
		MaxTotalQueues:        32_768,
		FlushInterval:         time.Second,
		FlushBytes:            64 << 20,
		IndexFlushInterval:    10 * time.Second,
		CleanInterval:         10 * time.Second,
		PreTouch:              false,
		TouchAhead:            0,
		UseAllocator:          true,
		FileReservedTime:      72 * time.Hour,
		DiskMaxUsedSpaceRatio: 75,
		CleanForciblyRatio:    85,
		DiskWarningRatio:      90,
		Now:                   time.Now,
		Logger:                hclog.NewNullLogger(),
	}
}

// Bounds of the size settings (Validate).
const (
	MaxCommitLogFileSize    = 1 << 40       // 1 TiB: a segment is mapped whole
	MaxConsumeQueueFileSize = 20 * 50000000 // 50M units: a file is mapped whole
	MaxPreallocateSegments  = 8
)

// Validate checks ranges and relations between fields; an error names the
// field (the key under [store] in the node's TOML file), its value and
// what it must be.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrBadConfig}, args...)...)
	}
	switch {
	case c.Dir == "":
		return bad("Dir is empty")
	case c.CommitLogFileSize < 8<<10 || c.CommitLogFileSize%4096 != 0 || c.CommitLogFileSize > MaxCommitLogFileSize:
		return bad("CommitLogFileSize = %d: the commitlog segment size must be a multiple of 4096 from 8 KiB to 1 TiB (default 1073741824, 1 GiB)", c.CommitLogFileSize)
	case c.ConsumeQueueFileSize <= 0 || c.ConsumeQueueFileSize%20 != 0 || c.ConsumeQueueFileSize > MaxConsumeQueueFileSize:
		return bad("ConsumeQueueFileSize = %d: the consume-queue file size must be a positive multiple of 20 (one unit) up to %d (default 6000000, 300,000 units)", c.ConsumeQueueFileSize, int64(MaxConsumeQueueFileSize))
	case c.PreallocateSegments < 0 || c.PreallocateSegments > MaxPreallocateSegments:
		return bad("PreallocateSegments = %d: the commitlog segments prepared ahead must be from 0 (none) to %d (default 1)", c.PreallocateSegments, MaxPreallocateSegments)
	case c.IndexMaxHashSlots <= 0 || c.IndexMaxIndexes <= 1:
		return bad("IndexMaxHashSlots %d and IndexMaxIndexes %d must be positive", c.IndexMaxHashSlots, c.IndexMaxIndexes)
	case c.MaxMessageSize <= 0 || c.MaxMessageSize > 4<<20:
		return bad("MaxMessageSize %d must be in (0, 4 MiB]", c.MaxMessageSize)
	case int64(c.MaxMessageSize)+4096 > c.CommitLogFileSize-message.BlankSize:
		return bad("CommitLogFileSize %d is too small for MaxMessageSize %d", c.CommitLogFileSize, c.MaxMessageSize)
	case c.DefaultQueues <= 0 || c.MaxQueues < c.DefaultQueues:
		return bad("DefaultQueues %d must be positive and at most MaxQueues %d", c.DefaultQueues, c.MaxQueues)
	case c.MaxTotalQueues < int(c.MaxQueues):
		return bad("MaxTotalQueues = %d: the queues of all topics together must be at least MaxQueues (%d) (default 32768)", c.MaxTotalQueues, c.MaxQueues)
	case c.FlushInterval <= 0 || c.CleanInterval <= 0 || c.IndexFlushInterval <= 0 || c.FlushBytes <= 0:
		return bad("FlushInterval, FlushBytes, IndexFlushInterval and CleanInterval must be positive")
	case c.TouchAhead < 0:
		return bad("TouchAhead %d must not be negative (0: none)", c.TouchAhead)
	case c.DiskMaxUsedSpaceRatio <= 0 || c.DiskMaxUsedSpaceRatio > 100 || c.CleanForciblyRatio > 100 || c.DiskWarningRatio > 100:
		return bad("disk ratios must be percentages")
	case c.Now == nil || c.Logger == nil:
		return bad("Now and Logger must be set")
	}
	return nil
}
