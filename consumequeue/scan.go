package consumequeue

// scanState is what a recovery scan carries from one file to the next.
type scanState struct {
	// fillersOK: filler units are still acceptable (only at the very start
	// of a queue's first file, before any real unit).
	fillersOK bool
	// prevEnd is the end of the last real unit (0 before any).
	prevEnd int64
	// reals counts the real units seen.
	reals int64
}

// scanUnits returns how many leading units of b continue a valid queue from
// st, the state after them, and whether the scan stopped at an invalid unit
// (false means every whole unit of b was valid).
//
// A unit is accepted when it is Valid and either a filler while fillers are
// still acceptable, or a real unit that does not start before the end of the
// previous one. Anything else ends the queue; so does an all-zero unit, the
// normal end of written data.
func scanUnits(b []byte, st scanState) (int, scanState, bool) {
	n := 0
	for ; (n+1)*UnitSize <= len(b); n++ {
		u := decodeUnit(b[n*UnitSize:])
		if !u.Valid() {
			return n, st, true
		}
		if u.IsFiller() {
			if !st.fillersOK {
				return n, st, true
			}
			continue
		}
		if u.PhyOffset < st.prevEnd {
			return n, st, true
		}
		st.fillersOK = false
		st.prevEnd = u.End()
		st.reals++
	}
	return n, st, false
}

// allZero reports whether b holds only zero bytes.
func allZero(b []byte) bool {
	for len(b) >= 8 {
		if b[0]|b[1]|b[2]|b[3]|b[4]|b[5]|b[6]|b[7] != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
