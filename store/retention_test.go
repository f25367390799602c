package store

import (
	"math/rand"
	"testing"
	"time"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/vfs"
)

// After retention, a queue's minimum offset is the first unit whose message
// is still in the commitlog, and it stays so across a restart: a consume
// queue file that straddles the commitlog's new minimum is kept, and on open
// its first units point at deleted segments (RocketMQ's correctMinOffset).
// Found by cluster-tests: a restarted node reported min offset 0 and a pull
// at 0 silently skipped to the first surviving message.
func TestQueueMinOffsetFollowsRetentionAcrossRestart(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	fsys := vfs.NewMem()
	cfg := smallConfig("/data/store")
	cfg.ConsumeQueueFileSize = 20 * 1000 // many segments per queue file
	later := time.Now().Add(cfg.FileReservedTime + time.Hour)
	cfg.Now = func() time.Time { return later }
	s := mustOpen(t, fsys, cfg)
	fillRetentionTopic(t, s, rng)
	if err := s.clean(); err != nil {
		t.Fatal(err)
	}
	logMin := s.log.MinOffset()
	if logMin == 0 {
		t.Fatalf("seed %d: retention deleted nothing; the test needs several segments", seed)
	}
	before := checkQueueMin(t, s, logMin, "before restart")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, fsys, cfg)
	defer s.Close()
	if got := checkQueueMin(t, s, logMin, "after restart"); got != before {
		t.Fatalf("seed %d: min offset %d before restart, %d after", seed, before, got)
	}
}

// checkQueueMin asserts that queue ret/0 starts at its first message at or
// above logMin and that a pull below it says so instead of skipping ahead.
func checkQueueMin(t *testing.T, s *Store, logMin int64, label string) int64 {
	t.Helper()
	minOff, err := s.MinOffset("ret", 0)
	if err != nil {
		t.Fatal(err)
	}
	if minOff == 0 {
		t.Fatalf("%s: min offset 0, but the commitlog starts at %d", label, logMin)
	}
	r, err := s.GetMessages("ret", 0, minOff, 1, 0, "")
	if err != nil || r.Status != Found || r.Messages[0].PhysicalOffset < logMin {
		t.Fatalf("%s: message at min offset %d: %v %v", label, minOff, err, r.Status)
	}
	r, err = s.GetMessages("ret", 0, minOff-1, 1, 0, "")
	if err != nil || r.Status != OffsetTooSmall || r.NextOffset != minOff {
		t.Fatalf("%s: pull below the minimum: %v, status %v next %d (want %v next %d)",
			label, err, r.Status, r.NextOffset, OffsetTooSmall, minOff)
	}
	return minOff
}

// Retention by disk usage, driven by the file system's own report
// (vfs.FS.Space): young segments stay while the disk has room and go, oldest
// first and never the last, once the used share passes
// DiskMaxUsedSpaceRatio. The store used to call statfs on its directory
// itself and to recognise MemFS by a method it happens to have, so this path
// had no test.
func TestRetentionByDiskUsage(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	fsys := vfs.NewMem()
	cfg := smallConfig("/data/store")
	// MemFS files carry no modification time (the zero time): a clock
	// standing there makes every segment brand new, so only the disk can
	// make retention delete.
	cfg.Now = func() time.Time { return time.Time{} }
	s := mustOpen(t, fsys, cfg)
	defer s.Close()
	fillRetentionTopic(t, s, rng)
	sp := func() vfs.Space {
		t.Helper()
		v, err := fsys.Space("/data/store")
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	fsys.SetCapacity(1 << 40) // plenty of room: nothing young goes
	if err := s.clean(); err != nil {
		t.Fatal(err)
	}
	if got := s.log.MinOffset(); got != 0 {
		t.Fatalf("seed %d: retention deleted below %d with %d of %d bytes used", seed, got, sp().Total-sp().Free, sp().Total)
	}
	used := int64(sp().Total - sp().Free)
	fsys.SetCapacity(used * 100 / int64(cfg.DiskMaxUsedSpaceRatio-1)) // just over the ratio
	if pct := s.diskUsedPercent(); pct < cfg.DiskMaxUsedSpaceRatio {
		t.Fatalf("used %d%% of the capacity, want ≥ %d%%", pct, cfg.DiskMaxUsedSpaceRatio)
	}
	if err := s.clean(); err != nil {
		t.Fatal(err)
	}
	logMin := s.log.MinOffset()
	if logMin == 0 {
		t.Fatalf("seed %d: a disk %d%% used deleted nothing", seed, s.diskUsedPercent())
	}
	if len(s.log.Segments()) == 0 || logMin >= s.log.WriteOffset() {
		t.Fatalf("seed %d: retention deleted the last segment (min %d, write offset %d)", seed, logMin, s.log.WriteOffset())
	}
	checkQueueMin(t, s, logMin, "after retention by disk usage")
}

// fillRetentionTopic creates topic ret (one queue) and writes 38 entries of
// 8 messages of about 1 KiB, several segments of smallConfig, then flushes.
func fillRetentionTopic(t *testing.T, s *Store, rng *rand.Rand) {
	t.Helper()
	if err := s.CreateTopic(header(1), TopicConfig{Name: "ret", Queues: 1}); err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := uint64(2); i < 40; i++ {
		msgs := make([]message.Message, 8)
		for j := range msgs {
			msgs[j] = testMessage("ret", 0, n, rng)
			msgs[j].Body = append(msgs[j].Body, make([]byte, 900)...)
			n++
		}
		if _, err := s.AppendMessages(header(i), msgs, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
}
