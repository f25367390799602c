package node

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/internal/testseed"
)

// typedEntries stores n entries from index 1 whose types, sizes and data
// come from rng: commands up to 200 KiB (larger than raft-wal's first read
// of an entry: the fork's GetLog hands its own buffer to the log), no-ops,
// barriers and configurations. It returns them by index.
func typedEntries(t *testing.T, st raft.LogStore, rng *rand.Rand, n int) map[uint64]*raft.Log {
	t.Helper()
	types := map[uint64]*raft.Log{}
	conf := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: "a", Address: "a"}}}
	for i := uint64(1); i <= uint64(n); i++ {
		l := &raft.Log{Index: i, Term: 1 + i/50}
		switch k := rng.IntN(10); {
		case k == 0:
			l.Type, l.Data = raft.LogConfiguration, raft.EncodeConfiguration(conf)
		case k == 1:
			l.Type = raft.LogNoop
		case k == 2:
			l.Type = raft.LogBarrier
		default:
			l.Type, l.Data = raft.LogCommand, walEntry(i)
			if rng.IntN(8) == 0 {
				l.Data = make([]byte, 64<<10+rng.IntN(136<<10))
				for j := range l.Data {
					l.Data[j] = byte(rng.Uint32())
				}
			}
		}
		must(t, st.StoreLogs([]*raft.Log{l}))
		types[i] = l
	}
	return types
}

// checkLogTypes checks GetLogType and GetLog against the stored entries,
// and that an index outside [first, last] is ErrLogNotFound.
func checkLogTypes(t *testing.T, what string, st raft.LogStore, types map[uint64]*raft.Log) {
	t.Helper()
	lt, ok := st.(raft.LogTypeReader)
	if !ok {
		t.Fatalf("%s: %T has no GetLogType", what, st)
	}
	first, err := st.FirstIndex()
	must(t, err)
	last, err := st.LastIndex()
	must(t, err)
	var logs []raft.Log
	for i := first; i <= last; i++ {
		got, err := lt.GetLogType(i)
		var l raft.Log
		if err != nil || got != types[i].Type || st.GetLog(i, &l) != nil || l.Type != got {
			t.Fatalf("%s: entry %d: GetLogType %v, %v; GetLog type %v; stored %v", what, i, got, err, l.Type, types[i].Type)
		}
		logs = append(logs, l)
	}
	for _, l := range logs { // after every read: no log shares a buffer another read reused
		if !bytes.Equal(l.Data, types[l.Index].Data) || l.Term != types[l.Index].Term {
			t.Fatalf("%s: entry %d: GetLog gave %d bytes of data, term %d; stored %d bytes, term %d",
				what, l.Index, len(l.Data), l.Term, len(types[l.Index].Data), types[l.Index].Term)
		}
	}
	for _, i := range []uint64{first - 1, last + 1, last + 1000} {
		if i == 0 {
			continue
		}
		if _, err := lt.GetLogType(i); !errors.Is(err, raft.ErrLogNotFound) {
			t.Fatalf("%s: GetLogType(%d) outside [%d,%d]: %v, want ErrLogNotFound", what, i, first, last, err)
		}
	}
}

// TestRaftWALGetLogType: the raft-wal fork's GetLogType (the header of an
// entry, not its data) answers what GetLog answers, and GetLog gives every
// entry's data (a large one in the buffer it was read into), in sealed segments and
// in the tail, after a reopen (sealed segments read through their index
// block), after compaction, and behind raft.LogCache.
func TestRaftWALGetLogType(t *testing.T) {
	rng := rand.New(rand.NewPCG(uint64(testseed.Seed(t)), 2))
	dir := t.TempDir()
	st := openTestWAL(t, dir)
	types := typedEntries(t, st, rng, 300)
	checkLogTypes(t, "written", st, types)
	checkLogTypes(t, "behind LogCache", CachedLogs(st), types)
	must(t, st.DeleteRange(1, 120))
	checkLogTypes(t, "compacted", st, types)
	must(t, st.Close())

	st = openTestWAL(t, dir)
	defer st.Close()
	checkLogTypes(t, "reopened", st, types)
}

// wholeReads counts the entries read whole (GetLog).
type wholeReads struct {
	RaftStore
	reads atomic.Int64
}

func (c *wholeReads) GetLog(index uint64, l *raft.Log) error {
	c.reads.Add(1)
	return c.RaftStore.GetLog(index, l)
}

func (c *wholeReads) GetLogType(index uint64) (raft.LogType, error) {
	return c.RaftStore.(raft.LogTypeReader).GetLogType(index)
}

// storeTwoConfigurations stores 400 entries of term 1: configuration first
// at index 1, second at 250, commands elsewhere.
func storeTwoConfigurations(t *testing.T, st raft.LogStore, first, second raft.Configuration) {
	t.Helper()
	var logs []*raft.Log
	for i := uint64(1); i <= 400; i++ {
		l := &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: walEntry(i)}
		switch i {
		case 1:
			l.Type, l.Data = raft.LogConfiguration, raft.EncodeConfiguration(first)
		case 250:
			l.Type, l.Data = raft.LogConfiguration, raft.EncodeConfiguration(second)
		}
		logs = append(logs, l)
	}
	must(t, st.StoreLogs(logs))
}

// TestStartReadsOnlyConfigurationEntries: at start Raft scans the log after
// the newest snapshot for configuration entries. Through a store with
// GetLogType (the node's raft-wal) it reads whole only those entries (and
// the last one, for its term), and
// still ends with the newest configuration.
func TestStartReadsOnlyConfigurationEntries(t *testing.T) {
	st := openTestWAL(t, t.TempDir())
	defer st.Close()
	one := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: "f", Address: "f"}}}
	two := raft.Configuration{Servers: append(one.Servers, raft.Server{Suffrage: raft.Voter, ID: "g", Address: "g"})}
	storeTwoConfigurations(t, st, one, two)
	counted := &wholeReads{RaftStore: st}

	_, trans := raft.NewInmemTransport("f")
	conf := raft.DefaultConfig()
	conf.LocalID = "f"
	conf.HeartbeatTimeout, conf.ElectionTimeout, conf.LeaderLeaseTimeout = time.Minute, time.Minute, time.Second
	conf.Logger = hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Warn, Output: testWriter{t}})
	r, err := raft.NewRaft(conf, &indexFSM{}, counted, st, raft.NewInmemSnapshotStore(), trans)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Shutdown().Error() }()
	if n := counted.reads.Load(); n != 3 {
		t.Fatalf("start read %d entries whole, want 3: the last (for its term) and the 2 configuration entries", n)
	}
	f := r.GetConfiguration()
	must(t, f.Error())
	if got := f.Configuration(); len(got.Servers) != 2 || got.Servers[1].ID != "g" {
		t.Fatalf("configuration after start: %+v, want the one of entry 250", got)
	}
}
