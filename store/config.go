package store

import (
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/raftmq/raftmq/commitlog"
)

// Config of a store. DefaultConfig gives RocketMQ's defaults. Every replica
// of a cluster must run with the same CommitLogFileSize, AutoCreateTopics,
// DefaultQueues and MaxQueues: they decide bytes and offsets.
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
	CleanInterval        time.Duration
	PreTouch             bool // allocator pre-touches the next segments
	UseAllocator         bool
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
		IndexMaxHashSlots:     5_000_000,
		IndexMaxIndexes:       20_000_000,
		MaxMessageSize:        4 << 20,
		AutoCreateTopics:      true,
		DefaultQueues:         8,
		MaxQueues:             1024,
		FlushInterval:         time.Second,
		CleanInterval:         10 * time.Second,
		PreTouch:              true,
		UseAllocator:          true,
		FileReservedTime:      72 * time.Hour,
		DiskMaxUsedSpaceRatio: 75,
		CleanForciblyRatio:    85,
		DiskWarningRatio:      90,
		Now:                   time.Now,
		Logger:                hclog.NewNullLogger(),
	}
}

// Validate checks ranges and relations between fields.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrBadConfig}, args...)...)
	}
	switch {
	case c.Dir == "":
		return bad("Dir is empty")
	case c.CommitLogFileSize < 8<<10 || c.CommitLogFileSize%4096 != 0:
		return bad("CommitLogFileSize %d must be a multiple of 4096 and at least 8 KiB", c.CommitLogFileSize)
	case c.ConsumeQueueFileSize <= 0 || c.ConsumeQueueFileSize%20 != 0:
		return bad("ConsumeQueueFileSize %d must be a positive multiple of 20", c.ConsumeQueueFileSize)
	case c.IndexMaxHashSlots <= 0 || c.IndexMaxIndexes <= 1:
		return bad("IndexMaxHashSlots %d and IndexMaxIndexes %d must be positive", c.IndexMaxHashSlots, c.IndexMaxIndexes)
	case c.MaxMessageSize <= 0 || c.MaxMessageSize > 4<<20:
		return bad("MaxMessageSize %d must be in (0, 4 MiB]", c.MaxMessageSize)
	case int64(c.MaxMessageSize)+4096 > c.CommitLogFileSize-commitlog.BlankSize:
		return bad("CommitLogFileSize %d is too small for MaxMessageSize %d", c.CommitLogFileSize, c.MaxMessageSize)
	case c.DefaultQueues <= 0 || c.MaxQueues < c.DefaultQueues:
		return bad("DefaultQueues %d must be positive and at most MaxQueues %d", c.DefaultQueues, c.MaxQueues)
	case c.FlushInterval <= 0 || c.CleanInterval <= 0:
		return bad("FlushInterval and CleanInterval must be positive")
	case c.DiskMaxUsedSpaceRatio <= 0 || c.DiskMaxUsedSpaceRatio > 100 || c.CleanForciblyRatio > 100 || c.DiskWarningRatio > 100:
		return bad("disk ratios must be percentages")
	case c.Now == nil || c.Logger == nil:
		return bad("Now and Logger must be set")
	}
	return nil
}
