package lossyfs

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testseed"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/vfs"
)

// The store test runs raftmq's store on lossyfs: a child writes entries,
// Flushes after flushAt of them, writes more and is SIGKILLed; the power
// goes (torn); a second child reopens the store and checks that recovery
// succeeds and is a prefix of what was written, no shorter than the flush.

const (
	storeTopic   = "t"
	storeEntries = 600
)

func storeConfig(dir string) store.Config {
	c := store.DefaultConfig(dir)
	c.CommitLogFileSize = 256 << 10
	c.ConsumeQueueFileSize = 20 * 256
	c.IndexMaxHashSlots = 64
	c.IndexMaxIndexes = 512
	c.MaxMessageSize = 8 << 10
	c.FlushInterval = time.Hour // flushes are explicit
	c.CleanInterval = time.Hour
	c.DefaultQueues = 1
	return c
}

// storeBody is entry i's message body for a seed.
func storeBody(seed int64, i int) []byte {
	rng := rand.New(rand.NewSource(seed + int64(i)))
	body := fmt.Appendf(nil, "entry-%d-", i)
	extra := make([]byte, 100+rng.Intn(1500))
	rng.Read(extra)
	return append(body, extra...)
}

func storeHeader(i int) store.EntryHeader {
	return store.EntryHeader{RaftIndex: uint64(i), Term: 1, StoreTimestamp: 1_700_000_000_000 + int64(i),
		StoreHost: message.HostPort{IP: [4]byte{127, 0, 0, 1}, Port: 7001}}
}

func envInt(name string) int {
	v, err := strconv.Atoi(os.Getenv(name))
	if err != nil {
		panic(fmt.Sprintf("%s: %v", name, err))
	}
	return v
}

func childStoreWrite(dir string) error {
	seed, flushAt := int64(envInt("LOSSYFS_SEED")), envInt("LOSSYFS_FLUSH_AT")
	s, err := store.Open(vfs.OS(), storeConfig(dir))
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	for i := 1; i <= storeEntries; i++ {
		msg := message.Message{Topic: storeTopic, QueueID: 0, BornTimestamp: int64(i), Body: storeBody(seed, i)}
		res, err := s.AppendMessages(storeHeader(i), []message.Message{msg}, nil)
		if err == nil && res[0].Err != nil {
			err = res[0].Err
		}
		if err != nil {
			return fmt.Errorf("append %d: %w", i, err)
		}
		if i == flushAt {
			if err := s.Flush(); err != nil {
				return fmt.Errorf("flush: %w", err)
			}
			applied, _ := s.Applied()
			fmt.Printf("FLUSHED %d\n", applied)
		}
	}
	fmt.Println("READY")
	block()
	return nil
}

func childStoreVerify(dir string) error {
	seed, flushAt := int64(envInt("LOSSYFS_SEED")), envInt("LOSSYFS_FLUSH_AT")
	s, err := store.Open(vfs.OS(), storeConfig(dir))
	if err != nil {
		return fmt.Errorf("recovery: %w", err)
	}
	defer s.Close()
	applied, _ := s.Applied()
	if applied < uint64(flushAt) || applied > storeEntries {
		return fmt.Errorf("applied %d after recovery, flushed %d, wrote %d", applied, flushAt, storeEntries)
	}
	maxOff, err := s.MaxOffset(storeTopic, 0)
	if err != nil {
		return fmt.Errorf("max offset: %w", err)
	}
	if maxOff != int64(applied) {
		return fmt.Errorf("queue max offset %d, applied %d (one message per entry)", maxOff, applied)
	}
	for off := int64(0); off < maxOff; {
		res, err := s.GetMessages(storeTopic, 0, off, 32, 1<<20, "")
		if err != nil {
			return fmt.Errorf("get at %d: %w", off, err)
		}
		if len(res.Messages) == 0 {
			return fmt.Errorf("no message at offset %d of %d (status %v)", off, maxOff, res.Status)
		}
		for _, m := range res.Messages {
			if want := storeBody(seed, int(m.QueueOffset)+1); m.QueueOffset != off || !bytes.Equal(m.Body, want) {
				return fmt.Errorf("message at offset %d (got offset %d): body %q..., want %q...", off, m.QueueOffset, m.Body[:16], want[:16])
			}
			off++
		}
	}
	fmt.Printf("RECOVERED %d\n", applied)
	return nil
}

func TestStoreRecoversAfterPowerLoss(t *testing.T) {
	seed := testseed.Seed(t)
	for _, torn := range []bool{false, true} {
		t.Run(fmt.Sprintf("torn=%v", torn), func(t *testing.T) {
			m := mount(t)
			dir := m.path("store")
			must(t, os.Mkdir(dir, 0o755))
			m.syncDir(".") // the data directory exists durably, as a node's --dir
			flushAt := storeEntries / 2
			env := []string{"LOSSYFS_DIR=" + dir, fmt.Sprintf("LOSSYFS_SEED=%d", seed), fmt.Sprintf("LOSSYFS_FLUSH_AT=%d", flushAt)}
			w := startChild(t, "store-write", env...)
			w.expect("FLUSHED")
			w.expect("READY")
			w.kill()
			rep := m.powerLoss(PowerLossOptions{Seed: seed, Torn: torn})
			if rep.DroppedBytes == 0 {
				t.Fatalf("power loss dropped nothing: %v", rep)
			}
			v := startChild(t, "store-verify", env...)
			got := v.expect("RECOVERED")
			v.wait()
			t.Logf("recovered up to entry %s of %d (flushed %d); %v", got, storeEntries, flushAt, rep)
			if _, err := os.Stat(filepath.Join(m.fs.Backing(), "store")); err != nil {
				t.Fatalf("store directory not in the backing directory: %v", err)
			}
		})
	}
}
