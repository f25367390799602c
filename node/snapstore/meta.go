package snapstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"path/filepath"

	"github.com/hashicorp/raft"
	"github.com/raftmq/raftmq/vfs"
)

// File and directory names inside a snapshot directory.
const (
	metaFile    = "meta.json"
	headerFile  = "header.bin"
	segmentsDir = "segments"
	stateFile   = "state.bin"

	tmpSuffix = ".tmp"
	delSuffix = ".del"

	formatVersion = 1
)

// Kinds of snapshot.
const (
	kindLinked = "linked" // header.bin + segments/ links
	kindStream = "stream" // state.bin
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// metaBody is the checksummed part of meta.json.
type metaBody struct {
	Version int               `json:"version"`
	Kind    string            `json:"kind"`
	Meta    raft.SnapshotMeta `json:"meta"`
}

// metaEnvelope is meta.json: the body's exact bytes and their CRC32-C.
type metaEnvelope struct {
	CRC  uint32          `json:"crc"`
	Body json.RawMessage `json:"body"`
}

func encodeMeta(b metaBody) ([]byte, error) {
	body, err := json.Marshal(b)
	if err != nil {
		return nil, err
	}
	return json.Marshal(metaEnvelope{CRC: crc32.Checksum(body, castagnoli), Body: body})
}

func decodeMeta(data []byte) (metaBody, error) {
	var env metaEnvelope
	var b metaBody
	if err := json.Unmarshal(data, &env); err != nil {
		return b, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if got := crc32.Checksum(env.Body, castagnoli); got != env.CRC {
		return b, fmt.Errorf("%w: meta crc %#x, want %#x", ErrCorrupt, got, env.CRC)
	}
	if err := json.Unmarshal(env.Body, &b); err != nil {
		return b, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	switch {
	case b.Version != formatVersion:
		return b, fmt.Errorf("%w: format version %d", ErrCorrupt, b.Version)
	case b.Kind != kindLinked && b.Kind != kindStream:
		return b, fmt.Errorf("%w: kind %q", ErrCorrupt, b.Kind)
	case b.Meta.Size < 0:
		return b, fmt.Errorf("%w: size %d", ErrCorrupt, b.Meta.Size)
	}
	return b, nil
}

// readMeta reads and verifies dir/meta.json.
func readMeta(fsys vfs.FS, dir string) (metaBody, error) {
	data, err := readFile(fsys, filepath.Join(dir, metaFile))
	if err != nil {
		return metaBody{}, err
	}
	b, err := decodeMeta(data)
	if err != nil {
		return b, err
	}
	if b.Meta.ID != filepath.Base(dir) {
		return b, fmt.Errorf("%w: meta names snapshot %q", ErrCorrupt, b.Meta.ID)
	}
	return b, nil
}

// readFile reads a whole (small) file; one above maxSmallFile is corrupt.
func readFile(fsys vfs.FS, name string) ([]byte, error) {
	b, err := vfs.ReadFile(fsys, name, maxSmallFile)
	if errors.Is(err, vfs.ErrFileTooLarge) {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return b, err
}

// maxSmallFile bounds meta.json and header.bin (the FSM header carries the
// store metadata: topics and consumer offsets).
const maxSmallFile = 1 << 30
