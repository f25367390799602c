package index

import "fmt"

// check verifies the structure of f's hash slots and entries below
// IndexCount, which no checksum covers: every entry's prevIndex is the
// previous entry of its slot, every slot names the newest entry of its
// slot (0 for none), phyOffset never decreases from one entry to the next
// (entries are put in commitlog order) nor passes the header's end, and
// neither does timeDiff from the second entry on (the first one's is
// taken against the previous file's end). A flipped bit in a keyHash moves the entry to another
// slot (for any slot count that is not a power of two), so it breaks a
// chain too; a flip in a slot or prevIndex breaks one directly. What it
// cannot see: a flip that keeps phyOffset or timeDiff between their
// neighbours' (the store checks the record a hit points at), or a keyHash
// flip that keeps its slot (slot counts that are powers of two).
// verify runs check once: it returns nil for a checked file and the same
// error for a damaged one every time.
func (f *file) verify() error {
	if f.checked.Load() {
		return nil
	}
	if d := f.damage.Load(); d != nil {
		return *d
	}
	if err := f.check(); err != nil {
		f.damage.Store(&err)
		return err
	}
	f.checked.Store(true)
	return nil
}

func (f *file) check() error {
	b, lay := f.bytes(), f.lay
	limit := lay.entryLimit(f.hdr)
	newest := make([]int32, lay.slots) // slot → its newest entry so far
	var lastPhy int64
	var lastDiff int32
	for n := 1; n < limit; n++ {
		e, ok := lay.readEntry(b, n)
		if !ok {
			return f.corrupt(n, "entry outside the file")
		}
		s := slotOf(e.KeyHash, lay.slots)
		switch {
		case e.PrevIndex != newest[s]:
			return f.corrupt(n, fmt.Sprintf("prevIndex %d, the previous entry of slot %d is %d", e.PrevIndex, s, newest[s]))
		case e.PhyOffset < lastPhy || e.PhyOffset > f.hdr.EndPhyOffset:
			return f.corrupt(n, fmt.Sprintf("phyOffset %d after %d (end %d)", e.PhyOffset, lastPhy, f.hdr.EndPhyOffset))
		case e.TimeDiff < lastDiff:
			return f.corrupt(n, fmt.Sprintf("timeDiff %d after %d", e.TimeDiff, lastDiff))
		}
		newest[s], lastPhy = int32(n), e.PhyOffset
		if n > 1 { // the first entry's timeDiff is against the previous file's end (put)
			lastDiff = e.TimeDiff
		}
	}
	for s := range lay.slots {
		if v := lay.readSlot(b, s); v != newest[s] {
			return fmt.Errorf("%w: %s: slot %d names entry %d, its newest entry is %d", ErrCorrupt, f.path, s, v, newest[s])
		}
	}
	return nil
}

func (f *file) corrupt(n int, reason string) error {
	return fmt.Errorf("%w: %s: entry %d: %s", ErrCorrupt, f.path, n, reason)
}
