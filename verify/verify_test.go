package verify

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testseed"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/mmap"
	"github.com/raftmq/raftmq/recovery"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/vfs"
)

// smallConfig makes segment, consume-queue and index files roll within a
// few hundred messages (a 64 KiB commitlog segment).
func smallConfig(dir string) store.Config {
	c := store.DefaultConfig(dir)
	c.CommitLogFileSize = 64 << 10
	c.ConsumeQueueFileSize = 20 * 64
	c.IndexMaxHashSlots = 16
	c.IndexMaxIndexes = 128
	c.MaxMessageSize = 8 << 10
	c.FlushInterval = time.Hour // Close flushes
	c.FlushBytes = math.MaxInt64
	c.CleanInterval = time.Hour
	c.UseAllocator = false
	c.PreTouch = false
	return c
}

func header(index uint64) store.EntryHeader {
	return store.EntryHeader{RaftIndex: index, Term: 1, StoreTimestamp: 1_700_000_000_000 + int64(index)*10,
		StoreHost: message.HostPort{IP: [4]byte{127, 0, 0, 1}, Port: 7001}}
}

// testMessage builds a message whose body names it, with a key and a tag.
func testMessage(topic string, queue int32, n int, rng *rand.Rand) message.Message {
	body := fmt.Appendf(nil, "msg-%d-", n)
	extra := make([]byte, rng.Intn(600))
	rng.Read(extra)
	props, err := message.EncodeProperties(
		message.Property{Key: message.PropertyKeys, Value: fmt.Sprintf("k%d common", n)},
		message.Property{Key: message.PropertyUniqKey, Value: fmt.Sprintf("U%08d", n)},
		message.Property{Key: message.PropertyTags, Value: []string{"red", "blue"}[n%2]},
	)
	if err != nil {
		panic(err)
	}
	return message.Message{Topic: topic, QueueID: queue, BornTimestamp: int64(n), Body: append(body, extra...), Properties: props}
}

// verifyFill applies entries [1, n] to a store in dir (a data dir: the
// store lives in dir/store): one message per entry, a command every 17th,
// so segments, consume queues and index files roll. It returns the results.
func verifyFill(t *testing.T, fsys *vfs.MemFS, dir string, n int, seed int64) []store.PutResult {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	s, err := store.Open(fsys, smallConfig(filepath.Join(dir, "store")))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	var out []store.PutResult
	for i := 1; i <= n; i++ {
		if i%17 == 0 {
			c := []store.OffsetCommit{{Group: "g", Topic: "demo", QueueID: 0, Offset: int64(i)}}
			if err := s.CommitOffsets(header(uint64(i)), c); err != nil {
				t.Fatalf("commit %d: %v", i, err)
			}
			continue
		}
		res, err := s.AppendMessages(header(uint64(i)), []message.Message{testMessage("demo", int32(i%3), i, rng)}, nil)
		if err != nil || res[0].Err != nil {
			t.Fatalf("append %d: %v %v", i, err, res[0].Err)
		}
		out = append(out, res[0])
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

// fsChecksums hashes every file under root.
func fsChecksums(t *testing.T, fsys *vfs.MemFS, root string) map[string][32]byte {
	t.Helper()
	sums := map[string][32]byte{}
	var walk func(dir string)
	walk = func(dir string) {
		names, err := fsys.List(dir)
		if err != nil {
			t.Fatalf("list %s: %v", dir, err)
		}
		for _, n := range names {
			p := filepath.Join(dir, n)
			fi, err := fsys.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if fi.IsDir() {
				sums[p+"/"] = [32]byte{}
				walk(p)
				continue
			}
			b, err := fsys.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			sums[p] = sha256.Sum256(b)
		}
	}
	walk(root)
	return sums
}

func sameChecksums(t *testing.T, before, after map[string][32]byte) {
	t.Helper()
	for p, s := range before {
		if a, ok := after[p]; !ok || a != s {
			t.Errorf("verify changed %s (present after: %v)", p, ok)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("verify created %s", p)
		}
	}
}

func TestVerifyIdenticalReplicas(t *testing.T) {
	seed := testseed.Seed(t)
	fsys := vfs.NewMem()
	verifyFill(t, fsys, "/a", 400, seed)
	verifyFill(t, fsys, "/b", 400, seed)
	before := fsChecksums(t, fsys, "/")
	var out bytes.Buffer
	// A data dir and a store dir are both accepted.
	if err := Stores(fsys, []string{"/a", "/b/store"}, &out); err != nil {
		t.Fatalf("verify: %v\n%s", err, out.String())
	}
	t.Log(out.String())
	sameChecksums(t, before, fsChecksums(t, fsys, "/"))
	if !strings.Contains(out.String(), "2 replicas identical") || !strings.Contains(out.String(), "queues=3") {
		t.Fatalf("report:\n%s", out.String())
	}
	if strings.Contains(out.String(), "warning:") {
		t.Fatalf("warnings on clean stores:\n%s", out.String())
	}
}

func TestVerifyBitFlipBelowCheckpoint(t *testing.T) {
	seed := testseed.Seed(t)
	fsys := vfs.NewMem()
	verifyFill(t, fsys, "/a", 300, seed)
	res := verifyFill(t, fsys, "/b", 300, seed)
	// Flip a body bit of a message in the middle (well below the checkpoint).
	victim := res[len(res)/2]
	seg := victim.PhysicalOffset - victim.PhysicalOffset%(64<<10)
	flipAt := victim.PhysicalOffset + message.OffBody + 2
	name := filepath.Join("/b/store", recovery.CommitLogDir, mmap.FileName(seg))
	if err := fsys.FlipBit(name, flipAt-seg, 3); err != nil {
		t.Fatal(err)
	}
	before := fsChecksums(t, fsys, "/")
	var out bytes.Buffer
	err := Stores(fsys, []string{"/a", "/b"}, &out)
	t.Log(out.String())
	if !errors.Is(err, ErrFailed) {
		t.Fatalf("verify of a flipped replica: %v", err)
	}
	sameChecksums(t, before, fsChecksums(t, fsys, "/"))
	entryStart := victim.PhysicalOffset - message.FrameSize // one message per entry
	for _, want := range []string{
		fmt.Sprintf("damaged below the checkpoint (confirmOffset %d) at offset %d", res[len(res)-1].PhysicalOffset+int64(res[len(res)-1].Size), entryStart),
		fmt.Sprintf("differ at offset %d (%s", flipAt, filepath.Join("/a/store", recovery.CommitLogDir, mmap.FileName(seg))),
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// Alone, the flipped replica still fails; the intact one passes.
	if err := Stores(fsys, []string{"/b"}, &bytes.Buffer{}); !errors.Is(err, ErrFailed) {
		t.Errorf("verify /b alone: %v", err)
	}
	if err := Stores(fsys, []string{"/a"}, &bytes.Buffer{}); err != nil {
		t.Errorf("verify /a alone: %v", err)
	}
}

func TestVerifyPrefixReplica(t *testing.T) {
	seed := testseed.Seed(t)
	fsys := vfs.NewMem()
	full := verifyFill(t, fsys, "/a", 400, seed)
	verifyFill(t, fsys, "/b", 150, seed)
	before := fsChecksums(t, fsys, "/")
	var out bytes.Buffer
	if err := Stores(fsys, []string{"/a", "/b"}, &out); err != nil {
		t.Fatalf("verify: %v\n%s", err, out.String())
	}
	t.Log(out.String())
	sameChecksums(t, before, fsChecksums(t, fsys, "/"))
	if !strings.Contains(out.String(), "identical in [0,") || strings.Contains(out.String(), fmt.Sprintf("identical in [0,%d)", full[len(full)-1].PhysicalOffset+int64(full[len(full)-1].Size))) {
		t.Fatalf("common range should end at the shorter replica:\n%s", out.String())
	}
	// A diverging replica (same prefix, then other bytes) is caught.
	verifyFill(t, fsys, "/c", 400, seed+1)
	if err := Stores(fsys, []string{"/a", "/c"}, &out); !errors.Is(err, ErrFailed) {
		t.Fatalf("diverging replicas: %v", err)
	}
}

func TestVerifyMissingDir(t *testing.T) {
	var out bytes.Buffer
	if err := Stores(vfs.NewMem(), []string{"/nothing"}, &out); !errors.Is(err, ErrFailed) {
		t.Fatalf("verify of a missing dir: %v", err)
	}
}
