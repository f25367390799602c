// Package entrycodec holds the field encoding of Raft log entries, shared by
// the FSM's entries (fsm) and the admin command bodies (meta): big-endian
// int32 and int64, uvarints in their minimal encoding only (so an entry has
// one encoding), and length-prefixed byte strings (uvarint length, then the
// bytes) with a bound per field.
//
// An Encoder and a Decoder keep the first error and turn every later call
// into a no-op returning zero values, so callers check once. Errors wrap the
// sentinel the caller passes in, so each package keeps its own.
package entrycodec

import (
	"encoding/binary"
	"fmt"
)

// Encoder appends fields to Buf.
type Encoder struct {
	Buf      []byte
	Err      error
	TooLarge error // wrapped by the error of a field over its bound
}

// I32 appends v big-endian.
func (e *Encoder) I32(v int32) { e.Buf = binary.BigEndian.AppendUint32(e.Buf, uint32(v)) }

// I64 appends v big-endian.
func (e *Encoder) I64(v int64) { e.Buf = binary.BigEndian.AppendUint64(e.Buf, uint64(v)) }

// Uvarint appends v as a uvarint.
func (e *Encoder) Uvarint(v uint64) { e.Buf = binary.AppendUvarint(e.Buf, v) }

// Bytes appends b with its length; a b longer than limit sets Err.
func (e *Encoder) Bytes(b []byte, limit int) {
	if len(b) > limit && e.Err == nil {
		e.Err = fmt.Errorf("%w: field of %d bytes > %d", e.TooLarge, len(b), limit)
	}
	e.Uvarint(uint64(len(b)))
	e.Buf = append(e.Buf, b...)
}

// Str appends s with its length; an s longer than limit sets Err.
func (e *Encoder) Str(s string, limit int) {
	if len(s) > limit && e.Err == nil {
		e.Err = fmt.Errorf("%w: string of %d bytes > %d", e.TooLarge, len(s), limit)
	}
	e.Uvarint(uint64(len(s)))
	e.Buf = append(e.Buf, s...)
}

// Decoder reads fields from Buf.
type Decoder struct {
	Buf       []byte
	Err       error
	Malformed error // wrapped by the error of a short or bad field
}

// Fail records that the field what is short or bad and drops the rest.
func (d *Decoder) Fail(what string) {
	if d.Err == nil {
		d.Err = fmt.Errorf("%w: short or bad %s", d.Malformed, what)
	}
	d.Buf = nil
}

// Take returns the next n bytes (capacity n), or nil after an error.
func (d *Decoder) Take(n int, what string) []byte {
	if d.Err != nil || n < 0 || n > len(d.Buf) {
		d.Fail(what)
		return nil
	}
	b := d.Buf[:n:n]
	d.Buf = d.Buf[n:]
	return b
}

// I32 reads a big-endian int32.
func (d *Decoder) I32() int32 {
	b := d.Take(4, "int32")
	if b == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(b))
}

// I64 reads a big-endian int64.
func (d *Decoder) I64() int64 {
	b := d.Take(8, "int64")
	if b == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(b))
}

// Uvarint reads a minimally encoded uvarint of at most limit.
func (d *Decoder) Uvarint(limit uint64, what string) int {
	if d.Err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.Buf)
	if n <= 0 || v > limit || n > 1 && d.Buf[n-1] == 0 {
		d.Fail(what)
		return 0
	}
	d.Buf = d.Buf[n:]
	return int(v)
}

// Count reads an element count and checks it against both limit and the
// bytes left (each element takes at least minSize), which bounds allocation.
func (d *Decoder) Count(limit, minSize int) int {
	n := d.Uvarint(uint64(limit), "count")
	if n*minSize > len(d.Buf) {
		d.Fail("count")
		return 0
	}
	return n
}

// Bytes reads a length-prefixed field of at most limit bytes (nil if
// empty); it aliases Buf.
func (d *Decoder) Bytes(limit int, what string) []byte {
	n := d.Uvarint(uint64(limit), what)
	b := d.Take(n, what)
	if n == 0 {
		return nil
	}
	return b
}

// Str reads a length-prefixed string of at most limit bytes.
func (d *Decoder) Str(limit int) string { return string(d.Bytes(limit, "string")) }
