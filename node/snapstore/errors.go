package snapstore

import "errors"

var (
	// ErrCorrupt is returned (wrapped) for a snapshot whose meta.json,
	// header or segment links do not check out.
	ErrCorrupt = errors.New("snapstore: corrupt snapshot")
	// ErrNotFound is returned (wrapped) by Open for an unknown or deleted ID.
	ErrNotFound = errors.New("snapstore: no such snapshot")
	// ErrSinkState is returned when a sink is used after Close or Cancel, or
	// is both written to and given links.
	ErrSinkState = errors.New("snapstore: sink misuse")
	// ErrVersion is returned by Create for a snapshot version Raft's store
	// interface does not know.
	ErrVersion = errors.New("snapstore: unsupported snapshot version")
)
