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
