package meta

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
)

// The producer table is what makes a send idempotent: a message with a PSEQ
// property ("<producer>:<seq>", message.ParseProducerSeq) is stored once per
// producer and sequence however often it is sent.
//
// Per producer it keeps the highest sequence stored (max) and, for the
// Window sequences up to it, which were stored (a bitmap). A message is
//
//   - a duplicate when its sequence is in that range and marked stored: it
//     is not stored again (the store answers with the first copy, found by
//     its UNIQ_KEY);
//   - too old (ErrSeqTooOld) when its sequence is Window or more below
//     max: it is refused, never stored twice;
//   - new otherwise, also out of order: a producer may have many sends in
//     flight, and a sequence below max that was never stored is stored.
//
// A producer that keeps fewer than Window sequences outstanding (sent but
// not answered) never has a first attempt refused as too old: every stored
// sequence was sent after the oldest outstanding one, so max stays below
// it + Window.
//
// A producer with no message stored for Expiry milliseconds of store time is
// forgotten: its next message starts a new window.
//
// The table is replicated state. It changes only when a message record is
// stored (Store), with that record's entry's store timestamp, on the live
// path and in recovery's replay alike, and with a SetDedup command, so
// every replica holds the same table at the same applied index. Lookups
// never change what a later lookup answers: dropping a producer that
// expired (Sweep) only frees its memory, because an expired producer
// answers as an absent one.

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

// Bounds of DedupConfig.
const (
	MinProducerExpiry = int64(1000)
	maxDedupWindow    = 1 << 20
)

// Validate checks the bounds: a window of 1 to 2^20 sequences, an expiry
// of at least a second. An error is ErrMalformed (wrapped).
func (c DedupConfig) Validate() error {
	if c.Window < 1 || c.Window > maxDedupWindow || c.Expiry < MinProducerExpiry {
		return fmt.Errorf("%w: dedup window %d (1-%d), producer expiry %d ms (at least %d)", ErrMalformed, c.Window, maxDedupWindow, c.Expiry, MinProducerExpiry)
	}
	return nil
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

// producer is one producer's window: bit (seq mod len(bits)*64) of bits
// says whether seq was stored, for seq in (max-window, max].
type producer struct {
	lastStored int64 // store timestamp of its newest stored message
	max        uint64
	window     uint64 // the window the bits cover (Config.Window when set up)
	bits       []uint64
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
	// SeqDuplicate: stored before.
	SeqDuplicate
	// SeqTooOld: below the window; refuse it.
	SeqTooOld
)

// Lookup says whether producer's seq, arriving with store timestamp now,
// is new, a duplicate or too old.
func (ps *Producers) Lookup(producerID []byte, seq uint64, now int64) Verdict {
	p := ps.live(producerID, now)
	switch {
	case p == nil || seq > p.max:
		return SeqNew
	case p.max-seq >= p.window:
		return SeqTooOld
	case p.stored(seq):
		return SeqDuplicate
	}
	return SeqNew
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

// Store records that producer's seq was stored by an entry with store
// timestamp now. Storing a sequence the window marks changes nothing but
// the time.
func (ps *Producers) Store(producerID []byte, seq uint64, now int64) {
	if now >= ps.nextSweep {
		ps.Sweep(now)
	}
	p := ps.table[string(producerID)]
	if p == nil || ps.expired(p, now) {
		p = &producer{max: seq}
		ps.table[string(producerID)] = p
	}
	p.lastStored = max(p.lastStored, now)
	p.resize(uint64(ps.Config.Window))
	switch {
	case seq-p.max >= p.window && seq > p.max:
		clear(p.bits) // the whole window moves past what it marked
		p.max = seq
	case seq > p.max:
		for s := p.max + 1; s < seq; s++ {
			p.mark(s, false) // not stored (yet): sends in flight
		}
		p.max = seq
	case p.max-seq >= p.window:
		return // below a window that moved on; the store refused nothing: a replay of an old record
	}
	p.mark(seq, true)
}

func (p *producer) stored(seq uint64) bool {
	i := seq % (uint64(len(p.bits)) * 64)
	return p.bits[i/64]&(1<<(i%64)) != 0
}

func (p *producer) mark(seq uint64, v bool) {
	i := seq % (uint64(len(p.bits)) * 64)
	if v {
		p.bits[i/64] |= 1 << (i % 64)
	} else {
		p.bits[i/64] &^= 1 << (i % 64)
	}
}

// resize sets the window to w sequences (a SetDedup changed it), keeping
// what it knows of the sequences both windows cover.
func (p *producer) resize(w uint64) {
	if p.window == w && p.bits != nil {
		return
	}
	old := *p
	p.window, p.bits = w, make([]uint64, (w+63)/64)
	if old.bits == nil {
		return
	}
	for s := p.max; p.max-s < min(w, old.window); s-- {
		p.mark(s, old.stored(s))
		if s == 0 {
			break
		}
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

// Sequences returns the sequences producerID's window marks stored,
// ascending, for tests and tools.
func (ps *Producers) Sequences(producerID string) []uint64 {
	p := ps.table[producerID]
	if p == nil {
		return nil
	}
	var out []uint64
	for s := p.max - min(p.max, p.window-1); s <= p.max; s++ {
		if p.stored(s) {
			out = append(out, s)
		}
	}
	return out
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
		b = binary.BigEndian.AppendUint64(b, p.max)
		b = binary.BigEndian.AppendUint32(b, uint32(p.window))
		for _, w := range p.bits {
			b = binary.BigEndian.AppendUint64(b, w)
		}
	}
	return b
}

func (d *decoder) producers() *Producers {
	cfg := DedupConfig{Window: int(d.u32()), Expiry: int64(d.u64())}
	if d.err == nil {
		if err := cfg.Validate(); err != nil {
			d.err = err
		}
	}
	ps := newProducers(cfg)
	for n := d.count(); n > 0 && d.err == nil; n-- {
		id := d.str()
		p := &producer{lastStored: int64(d.u64()), max: d.u64(), window: uint64(d.u32())}
		words := (p.window + 63) / 64
		if p.window < 1 || p.window > maxDedupWindow || words*8 > uint64(len(d.b)) {
			d.err = fmt.Errorf("%w: producer window of %d", ErrMalformed, p.window)
			break
		}
		p.bits = make([]uint64, words)
		for i := range p.bits {
			p.bits[i] = d.u64()
		}
		if d.err == nil {
			ps.table[id] = p
		}
	}
	return ps
}
