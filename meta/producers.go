package meta

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
)

// The producer table is what makes a send idempotent: a message with a PSEQ
// property ("<producer>:<seq>", message.ParseProducerSeq) is stored once per
// producer and sequence however often it is sent.
//
// Per producer it keeps the Window highest sequences stored, each with the
// commitlog offset of its record, and a floor: every sequence below it was
// stored and has left the window, or can no longer be told apart from one
// that was. A message is
//
//   - a duplicate when its sequence is in the window: it is not stored
//     again and gets the first one's result;
//   - too old (ErrSeqTooOld) when its sequence is below the floor: it is
//     refused, never stored twice;
//   - new otherwise, also out of order: a producer may have many sends in
//     flight, and a sequence below the window's newest one that was never
//     stored is stored.
//
// A producer that keeps fewer than Window sequences outstanding (sent but
// not answered) never has a first attempt refused as too old: a sequence
// leaves the window only after Window higher ones were stored, and each of
// those was sent after it.
//
// A producer with no message stored for Expiry milliseconds of store time is
// forgotten: its next message starts a new window.
//
// The table is replicated state. It changes only when a message record is
// stored (Store), with that record's entry's store timestamp, on the live
// path and in recovery's replay alike, so every replica holds the same
// table at the same applied index. Lookups never change what a later
// lookup answers: dropping a producer that expired (Sweep) only frees its
// memory, because an expired producer answers as an absent one.

// ErrSeqTooOld is returned (wrapped) for a sequence below its producer's
// window.
var ErrSeqTooOld = errors.New("meta: producer sequence older than the dedup window")

// Dedup settings' defaults.
const (
	// DefaultDedupWindow is the sequences kept per producer. The Go client
	// keeps at most as many outstanding.
	DefaultDedupWindow = 4096
	// DefaultProducerExpiry is how long (ms of store time) a producer with
	// no stored message is remembered: far beyond any client's retries.
	DefaultProducerExpiry = int64(60 * 60 * 1000)
)

// DedupConfig are the producer table's settings. They are part of the
// replicated state (encoded with the table), so every replica applies the
// same ones.
type DedupConfig struct {
	Window int   // sequences kept per producer
	Expiry int64 // ms of store time after a producer's last stored message
}

// DefaultDedupConfig returns the defaults.
func DefaultDedupConfig() DedupConfig {
	return DedupConfig{Window: DefaultDedupWindow, Expiry: DefaultProducerExpiry}
}

// Producers is the producer table. It is not safe for concurrent use.
type Producers struct {
	Config    DedupConfig
	table     map[string]*producer
	nextSweep int64 // store time of the next memory sweep (not replicated)
}

// producer is one producer's window: seqs[start:] ascending, offs alongside.
type producer struct {
	lastStored int64  // store timestamp of its newest stored message
	floor      uint64 // sequences below are too old
	start      int
	seqs       []uint64
	offs       []int64
}

func newProducers(cfg DedupConfig) *Producers {
	return &Producers{Config: cfg, table: map[string]*producer{}}
}

// Len is the number of producers in the table (expired ones included until
// a sweep drops them).
func (ps *Producers) Len() int { return len(ps.table) }

// Verdict is what Lookup says of a message.
type Verdict int

const (
	// SeqNew: store it.
	SeqNew Verdict = iota
	// SeqDuplicate: stored before, at the offset Lookup returns.
	SeqDuplicate
	// SeqTooOld: below the window; refuse it.
	SeqTooOld
)

// Lookup says whether producer's seq, arriving with store timestamp now,
// is new, a duplicate (with the commitlog offset of the stored record) or
// too old.
func (ps *Producers) Lookup(producerID []byte, seq uint64, now int64) (Verdict, int64) {
	p := ps.live(producerID, now)
	if p == nil {
		return SeqNew, 0
	}
	if seq < p.floor {
		return SeqTooOld, 0
	}
	live := p.seqs[p.start:]
	if i, ok := slices.BinarySearch(live, seq); ok {
		return SeqDuplicate, p.offs[p.start+i]
	}
	return SeqNew, 0
}

// live returns producerID's window, nil when absent or expired at now.
func (ps *Producers) live(producerID []byte, now int64) *producer {
	p := ps.table[string(producerID)]
	if p == nil || ps.expired(p, now) {
		return nil
	}
	return p
}

func (ps *Producers) expired(p *producer, now int64) bool {
	return now-p.lastStored > ps.Config.Expiry
}

// Store records that producer's seq was stored at commitlog offset off by
// an entry with store timestamp now. Storing a sequence the window holds
// changes nothing.
func (ps *Producers) Store(producerID []byte, seq uint64, off, now int64) {
	if now >= ps.nextSweep {
		ps.Sweep(now)
	}
	p := ps.table[string(producerID)]
	if p == nil || ps.expired(p, now) {
		p = &producer{}
		ps.table[string(producerID)] = p
	}
	p.lastStored = max(p.lastStored, now)
	p.insert(seq, off, ps.Config.Window)
}

// insert adds seq to the window, keeping its window highest sequences.
func (p *producer) insert(seq uint64, off int64, window int) {
	live := p.seqs[p.start:]
	i, found := slices.BinarySearch(live, seq)
	if found || seq < p.floor {
		return
	}
	for len(live) >= window { // more than one when the window setting shrank
		if i == 0 { // below every kept sequence of a full window
			p.floor = max(p.floor, seq+1)
			return
		}
		p.floor = max(p.floor, live[0]+1)
		p.start++
		live = live[1:]
		i--
	}
	at := p.start + i
	p.seqs = slices.Insert(p.seqs, at, seq)
	p.offs = slices.Insert(p.offs, at, off)
	if p.start >= window { // compact: amortized O(1) per stored sequence
		n := copy(p.seqs, p.seqs[p.start:])
		copy(p.offs, p.offs[p.start:])
		p.seqs, p.offs, p.start = p.seqs[:n], p.offs[:n], 0
	}
}

// Sweep drops the producers expired at now. Lookups answer as before: an
// expired producer answers as an absent one.
func (ps *Producers) Sweep(now int64) {
	for id, p := range ps.table {
		if ps.expired(p, now) {
			delete(ps.table, id)
		}
	}
	ps.nextSweep = now + max(ps.Config.Expiry/4, 1000)
}

// Sequences returns producerID's window (ascending) and its floor, for
// tests and tools.
func (ps *Producers) Sequences(producerID string) (seqs []uint64, floor uint64) {
	p := ps.table[producerID]
	if p == nil {
		return nil, 0
	}
	return slices.Clone(p.seqs[p.start:]), p.floor
}

// appendProducers encodes the table (producers sorted by id).
func (ps *Producers) appendProducers(b []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(ps.Config.Window))
	b = binary.BigEndian.AppendUint64(b, uint64(ps.Config.Expiry))
	ids := make([]string, 0, len(ps.table))
	for id := range ps.table {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	b = binary.BigEndian.AppendUint32(b, uint32(len(ids)))
	for _, id := range ids {
		p := ps.table[id]
		b = appendString(b, id)
		b = binary.BigEndian.AppendUint64(b, uint64(p.lastStored))
		b = binary.BigEndian.AppendUint64(b, p.floor)
		live := p.seqs[p.start:]
		b = binary.BigEndian.AppendUint32(b, uint32(len(live)))
		for i, seq := range live {
			b = binary.BigEndian.AppendUint64(b, seq)
			b = binary.BigEndian.AppendUint64(b, uint64(p.offs[p.start+i]))
		}
	}
	return b
}

// producerEntryBytes is one encoded window entry (seq, offset).
const producerEntryBytes = 16

// maxDedupWindow bounds a decoded window setting.
const maxDedupWindow = 1 << 20

func (d *decoder) producers() *Producers {
	cfg := DedupConfig{Window: int(d.u32()), Expiry: int64(d.u64())}
	if d.err == nil && (cfg.Window <= 0 || cfg.Window > maxDedupWindow || cfg.Expiry <= 0) {
		d.err = fmt.Errorf("%w: dedup window %d, expiry %d", ErrMalformed, cfg.Window, cfg.Expiry)
	}
	ps := newProducers(cfg)
	for n := d.count(); n > 0 && d.err == nil; n-- {
		id := d.str()
		p := &producer{lastStored: int64(d.u64()), floor: d.u64()}
		k := int(d.u32())
		if k > maxDedupWindow || k*producerEntryBytes > len(d.b) {
			d.err = fmt.Errorf("%w: producer window of %d", ErrMalformed, k)
			break
		}
		p.seqs, p.offs = make([]uint64, k), make([]int64, k)
		for i := range k {
			p.seqs[i], p.offs[i] = d.u64(), int64(d.u64())
			if i > 0 && p.seqs[i] <= p.seqs[i-1] || p.seqs[i] < p.floor {
				d.err = fmt.Errorf("%w: producer window out of order", ErrMalformed)
			}
		}
		if d.err == nil {
			ps.table[id] = p
		}
	}
	return ps
}
