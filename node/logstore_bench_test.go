package node

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"

	"github.com/raftmq/raftmq/internal/testseed"
	"github.com/raftmq/raftmq/vfs"
)

var (
	logBenchTrailing = flag.Uint64("logstore.trailing", 512,
		"BenchmarkRaftLogStore: entries kept after a compaction (raft TrailingLogs)")
	logBenchThreshold = flag.Uint64("logstore.threshold", 512,
		"BenchmarkRaftLogStore: entries between compactions (raft SnapshotThreshold)")
)

// logStoreCase is one log store configuration BenchmarkRaftLogStore measures.
type logStoreCase struct {
	name string
	kind string
	bolt func(*bbolt.Options) // changes to DefaultBoltOptions; nil: none
}

func logStoreCases() []logStoreCase {
	return []logStoreCase{
		{name: "wal", kind: LogStoreWAL},
		{name: "bolt", kind: LogStoreBolt},
		{name: "bolt-freelistsync", kind: LogStoreBolt, bolt: func(o *bbolt.Options) { o.NoFreelistSync = false }},
		{name: "bolt-arrayfreelist", kind: LogStoreBolt, bolt: func(o *bbolt.Options) { o.FreelistType = bbolt.FreelistArrayType }},
		{name: "bolt-nogrowsync-mmap1g", kind: LogStoreBolt, bolt: func(o *bbolt.Options) {
			o.NoGrowSync, o.InitialMmapSize = true, 1<<30
		}},
		{name: "bolt-page16k", kind: LogStoreBolt, bolt: func(o *bbolt.Options) { o.PageSize = 16 << 10 }},
	}
}

// BenchmarkRaftLogStore measures the write amplification of each Raft log
// store: disk bytes written per message body byte, for group-commit entries
// of msgs × 1 KiB messages stored as raft does (StoreLogs of batch entries,
// fsync on) with compaction as raft does it (every -logstore.threshold
// entries, DeleteRange of all but the last -logstore.trailing). One op is
// one StoreLogs call. Metrics:
//
//	disk-B/body-B     write_bytes of /proc/self/io over the timed loop
//	file-B/body-B     RaftStore.WrittenBytes (what the store wrote to its files)
//	meta-B/body-B     bolt only: one meta page per write transaction
//	pages/entry-page  bolt only: data pages written per page of new entries
//	compact-B/body-B  the part of disk-B/body-B written by DeleteRange
//	body-MB/s         message body bytes stored per second
//
// The store is pre-filled with -logstore.trailing entries so compaction is
// in its steady state from the first timed op. Run the cases alternated
// (-count > 1 repeats the whole list, so A and B interleave), e.g.
//
//	go test ./node -run '^$' -bench RaftLogStore -benchtime 1200x -count 2
func BenchmarkRaftLogStore(b *testing.B) {
	if _, err := vfs.ProcessWriteBytes(0); err != nil {
		b.Skipf("no per-process I/O accounting: %v", err)
	}
	for _, shape := range []struct{ msgs, batch int }{{25, 1}, {25, 8}, {256, 1}} {
		for _, c := range logStoreCases() {
			b.Run(fmt.Sprintf("msgs=%d/batch=%d/%s", shape.msgs, shape.batch, c.name), func(b *testing.B) {
				benchLogStore(b, c, shape.msgs, shape.batch)
			})
		}
	}
}

func benchLogStore(b *testing.B, c logStoreCase, msgs, batch int) {
	opts := RaftStoreOptions{}
	if c.bolt != nil {
		opts.Bolt = DefaultBoltOptions()
		c.bolt(opts.Bolt)
	}
	st, err := OpenRaftStoreWith(c.kind, b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	bs, _ := st.(*boltStore)

	// An entry: msgs messages of 1 KiB body plus ~48 bytes of per-message
	// framing (topic, queue, properties), incompressible.
	const body, frame = 1024, 48
	data := make([]byte, msgs*(body+frame))
	seed := testseed.Seed(b)
	rng := rand.New(rand.NewPCG(uint64(seed), 3))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	var next uint64 = 1
	first := next
	trailing, threshold := *logBenchTrailing, *logBenchThreshold
	logs := make([]*raft.Log, batch)
	store := func() error {
		for i := range logs {
			logs[i] = &raft.Log{Index: next, Term: 1, Type: raft.LogCommand, Data: data, AppendedAt: time.Now()}
			next++
		}
		return st.StoreLogs(logs)
	}
	var compactDisk int64
	compact := func(timed bool) error {
		last := next - 1
		if last-first+1 < trailing+threshold {
			return nil
		}
		before, err := vfs.ProcessWriteBytes(0)
		if err != nil {
			return err
		}
		upTo := last - trailing
		if err := st.DeleteRange(first, upTo); err != nil {
			return fmt.Errorf("DeleteRange(%d, %d): %w", first, upTo, err)
		}
		first = upTo + 1
		after, err := vfs.ProcessWriteBytes(0)
		if timed {
			compactDisk += after - before
		}
		return err
	}
	for next <= trailing {
		if err := store(); err != nil {
			b.Fatalf("seed %d: prefill: %v", seed, err)
		}
	}
	disk0, err := vfs.ProcessWriteBytes(0)
	if err != nil {
		b.Fatal(err)
	}
	file0 := st.WrittenBytes()
	var txs0 int64
	if bs != nil {
		txs0 = bs.txs.Load()
	}
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if err := store(); err != nil {
			b.Fatalf("seed %d: StoreLogs: %v", seed, err)
		}
		if err := compact(true); err != nil {
			b.Fatalf("seed %d: %v", seed, err)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	disk1, err := vfs.ProcessWriteBytes(0)
	if err != nil {
		b.Fatal(err)
	}
	bodyBytes := float64(b.N * batch * msgs * body)
	b.ReportMetric(float64(disk1-disk0)/bodyBytes, "disk-B/body-B")
	b.ReportMetric(float64(st.WrittenBytes()-file0)/bodyBytes, "file-B/body-B")
	b.ReportMetric(float64(compactDisk)/bodyBytes, "compact-B/body-B")
	if bs != nil {
		meta := (bs.txs.Load() - txs0) * bs.page
		b.ReportMetric(float64(meta)/bodyBytes, "meta-B/body-B")
		// How many times bolt wrote each entry's pages: page writes other
		// than meta pages over the pages the new entries occupy.
		entryPages := (int64(len(data)) + bs.page - 1) / bs.page * bs.page
		b.ReportMetric(float64(st.WrittenBytes()-file0-meta)/float64(int64(b.N*batch)*entryPages), "pages/entry-page")
	}
	b.ReportMetric(bodyBytes/1e6/elapsed.Seconds(), "body-MB/s")
	// The log must still hold exactly the trailing window.
	lo, err1 := st.FirstIndex()
	hi, err2 := st.LastIndex()
	if err := errors.Join(err1, err2); err != nil || hi != next-1 || lo != first && c.kind == LogStoreBolt {
		b.Fatalf("seed %d: log holds [%d, %d], want [%d, %d] (%v)", seed, lo, hi, first, next-1, err)
	}
}
