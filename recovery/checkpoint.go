package recovery

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"path/filepath"

	"github.com/raftmq/raftmq/index"
	"github.com/raftmq/raftmq/vfs"
)

// Checkpoint file layout (big-endian), version 2 (version 1, still read, has
// no indexConfirmOffset: its index state is as of confirmPhyOffset). The first 40 bytes are
// RocketMQ's StoreCheckpoint fields so tools that read those still work; the
// rest is raftmq's extension. The whole file is replaced atomically (write a
// temporary file, fsync it, rename it over "checkpoint", fsync the directory),
// so a reader sees either the old or the new checkpoint, never a mix; the
// trailing CRC32C catches anything else (bit rot, a foreign file).
//
//	off  size  field
//	  0     8  physicMsgTimestamp   store time of the last durable entry
//	  8     8  logicsMsgTimestamp   same (consume queues are flushed with it)
//	 16     8  indexMsgTimestamp    same (index is flushed with it)
//	 24     8  masterFlushedOffset  = confirmPhyOffset
//	 32     8  confirmPhyOffset     end of the last durable, complete entry
//	 40     4  magic                CheckpointMagic
//	 44     4  version              CheckpointVersion
//	 48     8  appliedIndex         Raft index of the entry ending at confirm
//	 56     8  appliedTerm          its term
//	 64     8  lastEntryOffset      start of that entry (-1: none)
//	 72     8  minOffset            commitlog min offset at checkpoint time
//	 80     4  indexFileLen         length of the index file name
//	 84     n  indexFile            newest index file name ("" if none)
//	  .     4  indexCount           its indexCount at checkpoint time
//	  .     4  indexSlotCount       its hashSlotCount at checkpoint time
//	  .     8  indexEndPhyOffset    its endPhyOffset
//	  .     8  indexEndTimestamp    its endTimestamp
//	  .     8  indexConfirmOffset   end of the last entry that index state covers
//	                                (v2; ≤ confirmPhyOffset: the index is flushed
//	                                less often than the commitlog)
//	  .     4  metaLen
//	  .     m  meta                 topics, consumer offsets, queue table
//	  .     4  crc32c               Castagnoli over every byte before it
const (
	CheckpointMagic   uint32 = 0x52514350 // "RQCP"
	CheckpointVersion uint32 = 2
	checkpointV1             = 1
	CheckpointName           = "checkpoint"
	checkpointFixed          = 84
	maxCheckpointSize        = 1 << 30
)

var (
	// ErrCheckpointCorrupt: the checkpoint fails its CRC, magic, version or
	// length checks. The store refuses to open.
	ErrCheckpointCorrupt = errors.New("recovery: checkpoint is corrupt")
	// ErrNoCheckpoint: no checkpoint file exists.
	ErrNoCheckpoint = errors.New("recovery: no checkpoint")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// IndexState is the durable state of the newest index file at a checkpoint
// and the commitlog prefix it covers.
type IndexState struct {
	index.State
	// ConfirmOffset is the end of the last entry this state covers (an
	// entry boundary, at most the checkpoint's ConfirmOffset): recovery
	// re-indexes the entries between it and the checkpoint's.
	ConfirmOffset int64
}

// Checkpoint says which prefix of the store is durable and consistent.
type Checkpoint struct {
	StoreTimestamp  int64 // store time of the last durable entry
	ConfirmOffset   int64
	AppliedIndex    uint64
	AppliedTerm     uint64
	LastEntryOffset int64
	MinOffset       int64
	Index           IndexState
	Meta            []byte
}

// Encode returns the file bytes.
func (c *Checkpoint) Encode() []byte {
	b := make([]byte, 0, checkpointFixed+len(c.Index.File)+36+len(c.Meta)+4)
	be := binary.BigEndian
	for i := 0; i < 3; i++ {
		b = be.AppendUint64(b, uint64(c.StoreTimestamp))
	}
	b = be.AppendUint64(b, uint64(c.ConfirmOffset))
	b = be.AppendUint64(b, uint64(c.ConfirmOffset))
	b = be.AppendUint32(b, CheckpointMagic)
	b = be.AppendUint32(b, CheckpointVersion)
	b = be.AppendUint64(b, c.AppliedIndex)
	b = be.AppendUint64(b, c.AppliedTerm)
	b = be.AppendUint64(b, uint64(c.LastEntryOffset))
	b = be.AppendUint64(b, uint64(c.MinOffset))
	b = be.AppendUint32(b, uint32(len(c.Index.File)))
	b = append(b, c.Index.File...)
	b = be.AppendUint32(b, uint32(c.Index.IndexCount))
	b = be.AppendUint32(b, uint32(c.Index.SlotCount))
	b = be.AppendUint64(b, uint64(c.Index.EndPhyOffset))
	b = be.AppendUint64(b, uint64(c.Index.EndTimestamp))
	b = be.AppendUint64(b, uint64(c.Index.ConfirmOffset))
	b = be.AppendUint32(b, uint32(len(c.Meta)))
	b = append(b, c.Meta...)
	return be.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// DecodeCheckpoint parses and verifies checkpoint bytes.
func DecodeCheckpoint(b []byte) (Checkpoint, error) {
	var c Checkpoint
	if len(b) < checkpointFixed+4 {
		return c, fmt.Errorf("%w: %d bytes", ErrCheckpointCorrupt, len(b))
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return c, fmt.Errorf("%w: crc mismatch", ErrCheckpointCorrupt)
	}
	r := reader{b: body}
	c.StoreTimestamp = int64(r.u64())
	r.skip(16)
	r.skip(8)
	c.ConfirmOffset = int64(r.u64())
	magic, version := r.u32(), r.u32()
	if magic != CheckpointMagic || version != CheckpointVersion && version != checkpointV1 {
		return c, fmt.Errorf("%w: magic %#x version %d", ErrCheckpointCorrupt, magic, version)
	}
	c.AppliedIndex = r.u64()
	c.AppliedTerm = r.u64()
	c.LastEntryOffset = int64(r.u64())
	c.MinOffset = int64(r.u64())
	c.Index.File = string(r.bytes(int(r.u32())))
	c.Index.IndexCount = int32(r.u32())
	c.Index.SlotCount = int32(r.u32())
	c.Index.EndPhyOffset = int64(r.u64())
	c.Index.EndTimestamp = int64(r.u64())
	c.Index.ConfirmOffset = c.ConfirmOffset
	if version != checkpointV1 {
		c.Index.ConfirmOffset = int64(r.u64())
	}
	c.Meta = r.bytes(int(r.u32()))
	if r.err != nil || len(r.b) != 0 {
		return c, fmt.Errorf("%w: bad lengths", ErrCheckpointCorrupt)
	}
	if c.ConfirmOffset < 0 || c.MinOffset < 0 || c.MinOffset > c.ConfirmOffset || c.LastEntryOffset >= c.ConfirmOffset {
		return c, fmt.Errorf("%w: offsets min=%d last=%d confirm=%d", ErrCheckpointCorrupt, c.MinOffset, c.LastEntryOffset, c.ConfirmOffset)
	}
	if c.Index.ConfirmOffset < 0 || c.Index.ConfirmOffset > c.ConfirmOffset {
		return c, fmt.Errorf("%w: index confirm offset %d, checkpoint's %d", ErrCheckpointCorrupt, c.Index.ConfirmOffset, c.ConfirmOffset)
	}
	return c, nil
}

// ReadCheckpoint reads dir/checkpoint. ErrNoCheckpoint if absent.
func ReadCheckpoint(fsys vfs.FS, dir string) (Checkpoint, error) {
	name := filepath.Join(dir, CheckpointName)
	b, err := readFile(fsys, name)
	if errors.Is(err, fs.ErrNotExist) {
		return Checkpoint{}, ErrNoCheckpoint
	}
	if err != nil {
		return Checkpoint{}, err
	}
	c, err := DecodeCheckpoint(b)
	if err != nil {
		return c, fmt.Errorf("%s: %w", name, err)
	}
	return c, nil
}

// WriteCheckpoint replaces dir/checkpoint atomically and durably.
func WriteCheckpoint(fsys vfs.FS, dir string, c *Checkpoint) error {
	return writeFileAtomic(fsys, dir, CheckpointName, c.Encode())
}

// readFile reads a checkpoint-sized file; a larger one is corrupt.
func readFile(fsys vfs.FS, name string) ([]byte, error) {
	b, err := vfs.ReadFile(fsys, name, maxCheckpointSize)
	if errors.Is(err, vfs.ErrFileTooLarge) {
		return nil, fmt.Errorf("%w: %w", ErrCheckpointCorrupt, err)
	}
	return b, err
}

func writeFileAtomic(fsys vfs.FS, dir, name string, data []byte) error {
	tmp := filepath.Join(dir, name+".tmp")
	if err := vfs.WriteFile(fsys, tmp, data); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return err
	}
	return fsys.SyncDir(dir)
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil || n < 0 || n > len(r.b) {
		r.err = ErrCheckpointCorrupt
		return make([]byte, max(n, 8))
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) skip(n int)         { r.take(n) }
func (r *reader) u32() uint32        { return binary.BigEndian.Uint32(r.take(4)) }
func (r *reader) u64() uint64        { return binary.BigEndian.Uint64(r.take(8)) }
func (r *reader) bytes(n int) []byte { return append([]byte(nil), r.take(n)...) }
