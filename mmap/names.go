package mmap

import (
	"fmt"
	"strconv"
)

// FileName returns the 20-digit, zero-padded name for a start offset.
func FileName(start int64) string { return fmt.Sprintf("%0*d", NameDigits, start) }

// ParseFileName is the inverse of FileName; it rejects anything else.
func ParseFileName(name string) (int64, error) {
	if len(name) != NameDigits {
		return 0, fmt.Errorf("%w: %q", ErrFileName, name)
	}
	for i := 0; i < len(name); i++ {
		if name[i] < '0' || name[i] > '9' {
			return 0, fmt.Errorf("%w: %q", ErrFileName, name)
		}
	}
	start, err := strconv.ParseInt(name, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %q: %v", ErrFileName, name, err)
	}
	return start, nil
}
