package index

import "errors"

var (
	// ErrShort: too few bytes to decode a header or an entry.
	ErrShort = errors.New("index: buffer too short")
	// ErrFileName: a file name that is not yyyyMMddHHmmssSSS.
	ErrFileName = errors.New("index: file name is not a yyyyMMddHHmmssSSS timestamp")
	// ErrCorrupt: an index file header that cannot be right.
	ErrCorrupt = errors.New("index: corrupt index file")
	// ErrConfig: a configuration that fails Validate.
	ErrConfig = errors.New("index: invalid config")
	// ErrArgument: an invalid argument (empty topic, negative offset,
	// non-positive maxNum).
	ErrArgument = errors.New("index: invalid argument")
	// ErrClosed: the service was closed.
	ErrClosed = errors.New("index: closed")
)
