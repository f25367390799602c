package index

import (
	"fmt"

	"github.com/hashicorp/go-hclog"
)

// maxCount bounds slot and entry counts (offsets stay int32-safe for slots
// and well inside int64 for entries).
const maxCount = 1 << 28

// Config configures a Service.
type Config struct {
	// Dir holds the index files.
	Dir string
	// MaxHashSlots per file; default DefaultMaxHashSlots.
	MaxHashSlots int
	// MaxIndexes per file (entry 0 included); default DefaultMaxIndexes.
	MaxIndexes int
	// StoreTime, if set, returns the store timestamp of the message at a
	// commitlog offset. TruncateAbove uses it to restore the exact
	// endTimestamp of a file it shortens; without it the end timestamp is
	// rebuilt from the entry's timeDiff (second precision).
	StoreTime func(phy int64) (int64, error)
	// Logger; default a null logger.
	Logger hclog.Logger
}

// DefaultConfig returns a Config with every default filled in except Dir.
func DefaultConfig() Config {
	return Config{
		MaxHashSlots: DefaultMaxHashSlots,
		MaxIndexes:   DefaultMaxIndexes,
		Logger:       hclog.NewNullLogger(),
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.MaxHashSlots == 0 {
		c.MaxHashSlots = d.MaxHashSlots
	}
	if c.MaxIndexes == 0 {
		c.MaxIndexes = d.MaxIndexes
	}
	if c.Logger == nil {
		c.Logger = d.Logger
	}
	return c
}

// Validate checks the configuration (after defaults).
func (c Config) Validate() error {
	switch {
	case c.Dir == "":
		return fmt.Errorf("%w: empty Dir", ErrConfig)
	case c.MaxHashSlots < 1 || c.MaxHashSlots > maxCount:
		return fmt.Errorf("%w: MaxHashSlots %d not in [1, %d]", ErrConfig, c.MaxHashSlots, maxCount)
	case c.MaxIndexes < 2 || c.MaxIndexes > maxCount:
		return fmt.Errorf("%w: MaxIndexes %d not in [2, %d]", ErrConfig, c.MaxIndexes, maxCount)
	}
	return nil
}
