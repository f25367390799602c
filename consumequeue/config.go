package consumequeue

import (
	"fmt"

	"github.com/hashicorp/go-hclog"
)

// Config configures a Store.
type Config struct {
	// Dir is the root: <Dir>/<topic>/<queueId>/<20-digit offset>.
	Dir string
	// FileSize of every queue file; a positive multiple of UnitSize.
	// Default DefaultFileSize.
	FileSize int64
	// Logger; default a null logger.
	Logger hclog.Logger
	// Durable, if set, says how many leading units of a queue Open finds
	// are known durable and valid: a checkpoint covers them (they were
	// synced before it was written). Recovery then scans a queue from its
	// last durable unit on instead of from its third-last file, so a
	// restart reads what came after the checkpoint, not up to three whole
	// files per queue. Zero, or a last durable unit that is not a real one
	// ending at or below DurableBelow, means the scan from the third-last
	// file.
	Durable func(topic string, queueID int32) int64
	// DurableBelow is the commitlog offset the checkpoint covers: a durable
	// unit points below it (a queue deleted and created again since holds
	// units above it, which are not durable).
	DurableBelow int64
}

// DefaultConfig returns a Config with every default filled in except Dir.
func DefaultConfig() Config {
	return Config{FileSize: DefaultFileSize, Logger: hclog.NewNullLogger()}
}

// withDefaults returns a copy with zero fields filled in.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.FileSize == 0 {
		c.FileSize = d.FileSize
	}
	if c.Logger == nil {
		c.Logger = d.Logger
	}
	return c
}

// Validate checks the configuration (after defaults).
func (c Config) Validate() error {
	if c.Dir == "" {
		return fmt.Errorf("%w: empty Dir", ErrConfig)
	}
	if c.FileSize <= 0 || c.FileSize%UnitSize != 0 {
		return fmt.Errorf("%w: FileSize %d is not a positive multiple of %d", ErrConfig, c.FileSize, UnitSize)
	}
	return nil
}
