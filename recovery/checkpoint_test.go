package recovery

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/raftmq/raftmq/index"
	"github.com/raftmq/raftmq/vfs"
)

func sampleCheckpoint() Checkpoint {
	return Checkpoint{
		StoreTimestamp: 1_700_000_000_123, ConfirmOffset: 70_000, AppliedIndex: 42, AppliedTerm: 3,
		LastEntryOffset: 65_536, MinOffset: 0, Meta: []byte("meta bytes"),
		Index: IndexState{State: index.State{File: "20231114221320123", IndexCount: 17, SlotCount: 9, EndPhyOffset: 69_000,
			EndTimestamp: 1_700_000_000_100}, ConfirmOffset: 69_500},
	}
}

func TestCheckpointRoundTrip(t *testing.T) {
	c := sampleCheckpoint()
	b := c.Encode()
	got, err := DecodeCheckpoint(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Encode(), b) || got.AppliedIndex != 42 || got.Index.File != c.Index.File || string(got.Meta) != "meta bytes" {
		t.Fatalf("round trip: %+v", got)
	}
	// RocketMQ's first 40 bytes: three timestamps, flushed and confirm offsets.
	for i, want := range []int64{c.StoreTimestamp, c.StoreTimestamp, c.StoreTimestamp, c.ConfirmOffset, c.ConfirmOffset} {
		var v int64
		for _, x := range b[i*8 : i*8+8] {
			v = v<<8 | int64(x)
		}
		if v != want {
			t.Fatalf("field %d = %d, want %d", i, v, want)
		}
	}
}

// A version-1 checkpoint (written before the index could lag the
// commitlog) still opens: its index state is as of confirmPhyOffset. An index
// confirm offset past the checkpoint's is corrupt.
func TestCheckpointVersion1AndIndexConfirm(t *testing.T) {
	c := sampleCheckpoint()
	v2 := c.Encode()
	// v1: version 1 and no indexConfirmOffset (the 8 bytes before metaLen).
	cut := len(v2) - 4 - len(c.Meta) - 4 - 8
	v1 := append([]byte(nil), v2[:cut]...)
	v1 = append(v1, v2[cut+8:len(v2)-4]...)
	binary.BigEndian.PutUint32(v1[44:], 1)
	v1 = binary.BigEndian.AppendUint32(v1, crc32.Checksum(v1, castagnoli))
	got, err := DecodeCheckpoint(v1)
	if err != nil {
		t.Fatal(err)
	}
	if got.Index.ConfirmOffset != c.ConfirmOffset || got.Index.EndPhyOffset != c.Index.EndPhyOffset || string(got.Meta) != "meta bytes" {
		t.Fatalf("v1: %+v", got)
	}
	c.Index.ConfirmOffset = c.ConfirmOffset + 1
	if _, err := DecodeCheckpoint(c.Encode()); !errors.Is(err, ErrCheckpointCorrupt) {
		t.Fatalf("index confirm past the checkpoint: %v", err)
	}
}

func TestCheckpointEveryBitFlipDetected(t *testing.T) {
	c := sampleCheckpoint()
	b := c.Encode()
	for i := range len(b) * 8 {
		bad := append([]byte(nil), b...)
		bad[i/8] ^= 1 << (i % 8)
		if _, err := DecodeCheckpoint(bad); !errors.Is(err, ErrCheckpointCorrupt) {
			t.Fatalf("bit %d flipped: %v", i, err)
		}
	}
	for n := 0; n < len(b); n++ {
		if _, err := DecodeCheckpoint(b[:n]); !errors.Is(err, ErrCheckpointCorrupt) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
	}
}

func TestCheckpointFileAndAbort(t *testing.T) {
	fsys := vfs.NewMem()
	if err := fsys.MkdirAll("/s", 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadCheckpoint(fsys, "/s"); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("missing: %v", err)
	}
	c := sampleCheckpoint()
	if err := WriteCheckpoint(fsys, "/s", &c); err != nil {
		t.Fatal(err)
	}
	// Power loss right after: the checkpoint is durable (synced, renamed).
	clone := fsys.CrashClone(vfs.CrashOptions{Mode: vfs.DropUnsynced})
	got, err := ReadCheckpoint(clone, "/s")
	if err != nil || got.AppliedIndex != c.AppliedIndex {
		t.Fatalf("after crash: %v %+v", err, got)
	}
	if ok, _ := AbortExists(fsys, "/s"); ok {
		t.Fatal("abort exists before create")
	}
	if err := CreateAbort(fsys, "/s", 1234); err != nil {
		t.Fatal(err)
	}
	if ok, _ := AbortExists(fsys.CrashClone(vfs.CrashOptions{Mode: vfs.DropUnsynced}), "/s"); !ok {
		t.Fatal("abort file not durable")
	}
	if err := RemoveAbort(fsys, "/s"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := AbortExists(fsys, "/s"); ok {
		t.Fatal("abort still exists")
	}
}

func FuzzDecodeCheckpoint(f *testing.F) {
	c := sampleCheckpoint()
	f.Add(c.Encode())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := DecodeCheckpoint(b)
		if err == nil && !bytes.Equal(got.Encode(), b) {
			t.Fatalf("accepted bytes that do not round-trip")
		}
	})
}
