package meta

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
)

// Delayed delivery keeps each scheduled message in ScheduleTopic, in the
// queue of its due hour (Bucket: the hour modulo ScheduleBuckets), with its
// due time as the consume-queue tagsCode, until a DeliverDue entry stores a
// copy in its real topic. Timer is the replicated progress of that: every
// scheduled message due at or before UpTo has been delivered, and in each
// bucket every unit below Done[bucket] belongs to an hour that has passed.
// The horizon (how far ahead a message may be scheduled) stays below
// ScheduleBuckets-1 hours, so a bucket holds one hour's pending messages at
// a time.

// Schedule layout.
const (
	ScheduleTopic    = "SCHEDULE_TOPIC_XXXX"
	ScheduleBuckets  = 1024
	ScheduleBucketMs = int64(3_600_000)
	// ScheduleHorizonMs bounds how far ahead of its store time a message
	// may be due: 40 days (960 hours), so a bucket holds units of one
	// pending hour at a time (it is reused 1,024 hours later).
	ScheduleHorizonMs = int64(40 * 24 * 3_600_000)
	// doneWindowHours: a bucket of an hour that ended within this many
	// hours of the store time cannot yet hold a unit of its next cycle
	// (that would be due more than the horizon ahead).
	doneWindowHours = ScheduleBuckets - ScheduleHorizonMs/ScheduleBucketMs - 1
)

// Bucket is the schedule queue of a due time.
func Bucket(due int64) int32 {
	return int32((due / ScheduleBucketMs) % ScheduleBuckets)
}

// Timer is the delivery progress (see above).
type Timer struct {
	UpTo int64
	Done map[int32]int64
	// Delivered counts the messages delivered (records marked
	// TIMER_DELIVERED): the scheduled records (the schedule queues' next
	// offsets together) minus it are pending.
	Delivered int64
}

// Pending is the number of scheduled messages not yet delivered.
func (t *Timer) Pending(queues map[QueueKey]int64) int64 {
	n := -t.Delivered
	for b := int32(0); b < ScheduleBuckets; b++ {
		n += queues[QueueKey{Topic: ScheduleTopic, Queue: b}]
	}
	return n
}

func newTimer() Timer { return Timer{Done: map[int32]int64{}} }

// Advance records that everything due up to upto was delivered by an
// entry with store time now: the buckets of the hours that ended by upto,
// within doneWindowHours of now, are done up to their queues' next offsets
// in queues (the queue table). Calling it again with the same upto changes
// nothing, so the live path and a replay that sees the mark on every
// delivered record agree.
func (t *Timer) Advance(upto, now int64, queues map[QueueKey]int64) {
	if upto <= t.UpTo {
		return
	}
	first := max(t.UpTo/ScheduleBucketMs, now/ScheduleBucketMs-doneWindowHours)
	for hour := first; (hour+1)*ScheduleBucketMs-1 <= upto; hour++ {
		b := int32(hour % ScheduleBuckets)
		if next := queues[QueueKey{Topic: ScheduleTopic, Queue: b}]; next > 0 {
			t.Done[b] = next
		}
	}
	t.UpTo = upto
}

func (t *Timer) append(b []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(t.UpTo))
	b = binary.BigEndian.AppendUint64(b, uint64(t.Delivered))
	keys := slices.Sorted(maps.Keys(t.Done))
	b = binary.BigEndian.AppendUint32(b, uint32(len(keys)))
	for _, k := range keys {
		b = binary.BigEndian.AppendUint32(b, uint32(k))
		b = binary.BigEndian.AppendUint64(b, uint64(t.Done[k]))
	}
	return b
}

func (d *decoder) timer() Timer {
	t := newTimer()
	t.UpTo = int64(d.u64())
	t.Delivered = int64(d.u64())
	for n := d.count(); n > 0 && d.err == nil; n-- {
		k := int32(d.u32())
		v := int64(d.u64())
		if k < 0 || k >= ScheduleBuckets || v < 0 {
			d.err = fmt.Errorf("%w: timer bucket %d at %d", ErrMalformed, k, v)
			break
		}
		t.Done[k] = v
	}
	return t
}
