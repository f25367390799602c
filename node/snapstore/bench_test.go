package snapstore

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/fsm"
)

// benchSegmentSize is smaller than the 1 GiB default so that the larger
// stores span many segments (each one is a hard link per snapshot);
// RAFTMQ_BENCH_SEGMENT_MIB overrides it (1024: the default segment size).
func benchSegmentSize() int64 {
	if mib, err := strconv.Atoi(os.Getenv("RAFTMQ_BENCH_SEGMENT_MIB")); err == nil && mib > 0 {
		return int64(mib) << 20
	}
	return 64 << 20
}

// benchFixture is a store filled to a size, shared by the sub-benchmarks of
// one size and removed in TestMain.
type benchFixture struct {
	root string
	fsm  *fsm.FSM
	next uint64 // next raft index
	rng  *rand.Rand
}

var (
	benchMu       sync.Mutex
	benchFixtures = map[int64]*benchFixture{}
)

func benchSizes() []int64 {
	sizes := []int64{10 << 20, 256 << 20}
	if os.Getenv("RAFTMQ_BENCH_BIG") == "1" {
		sizes = append(sizes, 1<<30)
	}
	return sizes
}

func sizeName(n int64) string {
	if n >= 1<<30 {
		return fmt.Sprintf("%dGiB", n>>30)
	}
	return fmt.Sprintf("%dMiB", n>>20)
}

// fixtureOf builds (once) a store holding at least size bytes of commitlog.
func fixtureOf(b *testing.B, size int64) *benchFixture {
	benchMu.Lock()
	defer benchMu.Unlock()
	if fx := benchFixtures[size]; fx != nil {
		return fx
	}
	root, err := os.MkdirTemp("", "snapbench-")
	if err != nil {
		b.Fatal(err)
	}
	fx := &benchFixture{root: root, rng: rand.New(rand.NewPCG(uint64(size), 1))}
	benchFixtures[size] = fx
	cfg := storeConfig(filepath.Join(root, "store"), benchSegmentSize())
	cfg.MaxMessageSize = 1 << 20
	fx.fsm = openFSM(b, cfg) // closed by cleanBenchFixtures
	fx.next = 1
	for fx.fsm.Store().ConfirmOffset() < size {
		fx.next = applyBatches(b, fx.fsm, fx.rng, fx.next, 16, 64, 4096) // 4 MiB a round
	}
	if err := fx.fsm.Store().Flush(); err != nil {
		b.Fatal(err)
	}
	return fx
}

func cleanBenchFixtures() {
	benchMu.Lock()
	defer benchMu.Unlock()
	for size, fx := range benchFixtures {
		_ = fx.fsm.Store().Close()
		_ = os.RemoveAll(fx.root)
		delete(benchFixtures, size)
	}
}

// BenchmarkSnapshot times what raft does for a local snapshot, FSM.Snapshot
// plus Persist into this store (links), on stores of different sizes; the
// time should not depend on the size. Before each iteration (untimed) one
// small entry is applied, so every snapshot has something new to flush.
func BenchmarkSnapshot(b *testing.B) {
	for _, size := range benchSizes() {
		b.Run(sizeName(size), func(b *testing.B) {
			fx := fixtureOf(b, size)
			s, err := New(b.TempDir(), 2, Options{})
			if err != nil {
				b.Fatal(err)
			}
			benchPersist(b, fx, s, nil)
			if st := s.Stats(); st.CopiedSegments != 0 {
				b.Fatalf("segments were copied: %+v", st)
			}
		})
	}
}

// BenchmarkSnapshotFullCopy is the baseline: the same Persist into raft's
// FileSnapshotStore, which gets the whole stream (O(store size)).
func BenchmarkSnapshotFullCopy(b *testing.B) {
	for _, size := range benchSizes() {
		b.Run(sizeName(size), func(b *testing.B) {
			fx := fixtureOf(b, size)
			s, err := raft.NewFileSnapshotStoreWithLogger(b.TempDir(), 1, hclog.NewNullLogger())
			if err != nil {
				b.Fatal(err)
			}
			_, trans := raft.NewInmemTransport("") // FileSnapshotStore encodes peers through it
			defer trans.Close()
			benchPersist(b, fx, s, trans)
		})
	}
}

func benchPersist(b *testing.B, fx *benchFixture, s raft.SnapshotStore, trans raft.Transport) {
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		fx.next = applyBatches(b, fx.fsm, fx.rng, fx.next, 1, 1, 100)
		b.StartTimer()
		snap, err := fx.fsm.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		sink, err := s.Create(1, fx.next-1, 1, configuration(), 1, trans)
		if err != nil {
			b.Fatal(err)
		}
		if err := snap.Persist(sink); err != nil {
			b.Fatal(err)
		}
		snap.Release()
	}
	b.ReportMetric(float64(fx.fsm.Store().ConfirmOffset())/(1<<20), "storeMiB")
}

// BenchmarkSnapshotAB alternates snapshots of the smallest and the largest
// store within one run (the disk is shared, so sequential runs drift) and
// reports the median time of each and their ratio; one op is one pair.
func BenchmarkSnapshotAB(b *testing.B) {
	sizes := benchSizes()
	small, big := fixtureOf(b, sizes[0]), fixtureOf(b, sizes[len(sizes)-1])
	stores := map[*benchFixture]*Store{}
	for _, fx := range []*benchFixture{small, big} {
		s, err := New(b.TempDir(), 2, Options{})
		if err != nil {
			b.Fatal(err)
		}
		stores[fx] = s
	}
	var smallT, bigT []time.Duration
	b.ResetTimer()
	for i := range b.N {
		order := []*benchFixture{small, big}
		if i%2 == 1 {
			order[0], order[1] = big, small
		}
		for _, fx := range order {
			d := timedSnapshot(b, fx, stores[fx])
			if fx == small {
				smallT = append(smallT, d)
			} else {
				bigT = append(bigT, d)
			}
		}
	}
	ms, mb := median(smallT), median(bigT)
	b.ReportMetric(float64(ms.Microseconds())/1000, sizeName(sizes[0])+"-ms")
	b.ReportMetric(float64(mb.Microseconds())/1000, sizeName(sizes[len(sizes)-1])+"-ms")
	b.ReportMetric(float64(mb)/float64(ms), "ratio")
}

// timedSnapshot applies one small entry, then times FSM.Snapshot + Persist.
func timedSnapshot(b *testing.B, fx *benchFixture, s *Store) time.Duration {
	fx.next = applyBatches(b, fx.fsm, fx.rng, fx.next, 1, 1, 100)
	start := time.Now()
	snap, err := fx.fsm.Snapshot()
	if err != nil {
		b.Fatal(err)
	}
	sink, err := s.Create(1, fx.next-1, 1, configuration(), 1, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := snap.Persist(sink); err != nil {
		b.Fatal(err)
	}
	snap.Release()
	return time.Since(start)
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
