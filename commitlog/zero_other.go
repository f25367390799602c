//go:build !linux

package commitlog

// zeroFrom reports whether b is all zero (see zero_linux.go).
func zeroFrom(f any, b []byte, base int64) bool { return isZero(b) }
