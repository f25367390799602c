package index

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/raftmq/raftmq/mmap"
)

// State is the durable state of the newest index file that a store
// checkpoint records. Every entry below IndexCount of File, and every older
// file, was flushed before the checkpoint was written.
type State struct {
	File         string
	IndexCount   int32
	SlotCount    int32
	EndPhyOffset int64
	EndTimestamp int64
}

// State returns the current state of the newest file (zero if none).
func (s *Service) State() State {
	s.mu.RLock()
	defer s.mu.RUnlock()
	f := s.newest()
	if f == nil {
		return State{}
	}
	return State{File: f.name, IndexCount: f.hdr.IndexCount, SlotCount: f.hdr.HashSlotCount,
		EndPhyOffset: f.hdr.EndPhyOffset, EndTimestamp: f.hdr.EndTimestamp}
}

// RecoverTo cuts the index back to a checkpointed State after a crash. The
// newest file may then hold slots that point at entries that never reached
// the disk (mmap pages are written back in any order), which would cut
// chains and lose older keys (RocketMQ #3868/#8007). RecoverTo deletes files
// newer than st.File, zeroes every entry at or above st.IndexCount, points
// each damaged slot back at its newest durable entry, and restores the
// header. Recovery then replays the keys from the checkpoint on.
func (s *Service) RecoverTo(st State) (err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	for len(s.files) > 0 && (st.File == "" || s.newest().name > st.File) {
		if err := s.removeNewest(); err != nil {
			return err
		}
	}
	f := s.newest()
	if f == nil || st.File == "" {
		return nil
	}
	defer func() {
		if err == nil {
			err = s.firstHeaderErr() // a file the checkpoint covers in full must be intact
		}
	}()
	if f.name != st.File {
		return fmt.Errorf("%w: checkpointed index file %s is missing (newest is %s)", ErrCorrupt, st.File, f.name)
	}
	if st.IndexCount < 1 || int(st.IndexCount) > f.lay.indexes {
		return fmt.Errorf("%w: checkpoint indexCount %d", ErrCorrupt, st.IndexCount)
	}
	return f.recoverTo(st)
}

func (f *file) recoverTo(st State) error {
	b := f.bytes()
	from := int64(f.lay.entryPos(int(st.IndexCount)))
	if err := f.mf.Zero(from, f.mf.Size()); err != nil {
		return fmt.Errorf("index: zero %s from %d: %w", f.path, from, err)
	}
	buf := make([]byte, recoverChunk)
	bad, left, err := f.badSlots(st.IndexCount, buf)
	if err != nil {
		return err
	}
	// Newest durable entry of each bad slot: one backward pass over the
	// entries, stopping as soon as every bad slot is resolved. A slot only
	// the lost tail used is never resolved, so the pass usually reads every
	// durable entry of the file (20 bytes each, up to 400 MB), in chunks.
	const chunkEntries = recoverChunk / EntrySize
	for hi := int(st.IndexCount); hi > 1 && left > 0; {
		lo := max(1, hi-chunkEntries)
		entries, err := f.readRange(int64(f.lay.entryPos(lo)), int64(f.lay.entryPos(hi)), buf)
		if err != nil {
			return err
		}
		for n := hi - 1; n >= lo && left > 0; n-- {
			p := (n - lo) * EntrySize
			slot := slotOf(int32(binary.BigEndian.Uint32(entries[p+entHash:])), f.lay.slots)
			if bad.has(slot) {
				f.lay.writeSlot(b, slot, int32(n))
				bad.clear(slot)
				left--
			}
		}
		hi = lo
	}
	if left > 0 {
		for slot := range f.lay.slots {
			if bad.has(slot) {
				f.lay.writeSlot(b, slot, 0)
			}
		}
	}
	f.hdr.IndexCount, f.hdr.HashSlotCount = st.IndexCount, st.SlotCount
	f.hdr.EndPhyOffset, f.hdr.EndTimestamp = st.EndPhyOffset, st.EndTimestamp
	if st.IndexCount <= 1 {
		f.hdr = Header{IndexCount: 1}
	}
	f.writeHeader()
	f.headerErr = nil
	return f.mf.Flush(0, int64(f.lay.entriesStart()))
}

// recoverChunk is how many bytes recoverTo reads at a time (a multiple of
// SlotSize and of EntrySize).
const recoverChunk = 1 << 20 / (SlotSize * EntrySize) * (SlotSize * EntrySize)

// badSlots returns the slots whose value is not a durable entry number
// (negative, or at or above indexCount) and how many there are. It reads
// the slot area (20 MB in a default file) in chunks of buf.
func (f *file) badSlots(indexCount int32, buf []byte) (slotSet, int, error) {
	bad := make(slotSet, (f.lay.slots+63)/64)
	n := 0
	chunkSlots := len(buf) / SlotSize
	for first := 0; first < f.lay.slots; first += chunkSlots {
		last := min(f.lay.slots, first+chunkSlots)
		area, err := f.readRange(int64(f.lay.slotPos(first)), int64(f.lay.slotPos(last)), buf)
		if err != nil {
			return nil, 0, err
		}
		for slot := first; slot < last; slot++ {
			if v := int32(binary.BigEndian.Uint32(area[(slot-first)*SlotSize:])); v < 0 || v >= indexCount {
				bad.set(slot)
				n++
			}
		}
	}
	return bad, n, nil
}

// readRange returns bytes [from, to) of the file: read into buf (which must
// hold them) where the file has a pread path, else the mapping itself.
// Recovery reads hundreds of MB of a file it just mapped, usually cold
// after a crash: through the mapping (advised random access: no readahead)
// that is a page fault per 4 KiB, 6.1 s for a full default file against
// 0.2 s warm; large preads go at the disk's sequential speed.
func (f *file) readRange(from, to int64, buf []byte) ([]byte, error) {
	r, ok := mmap.ReaderAt(f.mf)
	if !ok {
		return f.bytes()[from:to], nil
	}
	b := buf[:to-from]
	if got, err := r.ReadAt(b, from); err != nil && !(errors.Is(err, io.EOF) && got == len(b)) {
		return nil, fmt.Errorf("index: read %s [%d, %d): %w", f.path, from, to, err)
	}
	return b, nil
}

// slotSet is a bitset of slot numbers.
type slotSet []uint64

func (b slotSet) set(i int)      { b[i>>6] |= 1 << (i & 63) }
func (b slotSet) clear(i int)    { b[i>>6] &^= 1 << (i & 63) }
func (b slotSet) has(i int) bool { return b[i>>6]&(1<<(i&63)) != 0 }
