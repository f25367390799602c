package consumequeue

import (
	"errors"
	"testing"

	"github.com/raftmq/raftmq/vfs"
)

func TestStoreQueues(t *testing.T) {
	fs := vfs.NewMem()
	s := openTest(t, fs, tfs)
	for _, bad := range []struct {
		topic string
		id    int32
		err   error
	}{{"", 0, ErrTopic}, {"a/b", 0, ErrTopic}, {"..", 0, ErrTopic}, {"T", -1, ErrQueueID}} {
		if _, err := s.GetOrCreate(bad.topic, bad.id); !errors.Is(err, bad.err) {
			t.Errorf("GetOrCreate(%q, %d) = %v", bad.topic, bad.id, err)
		}
	}
	putN(t, mustQueue(t, s, "B", 1), 0, 3)
	putN(t, mustQueue(t, s, "A", 7), 0, 9)
	putN(t, mustQueue(t, s, "B", 0), 0, 1)
	if s.Get("C", 0) != nil {
		t.Fatal("absent queue found")
	}
	if got := s.MaxPhyOffset(); got != unitN(8).End() {
		t.Fatalf("MaxPhyOffset = %d", got)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openTest(t, fs, tfs)
	var names []string
	for _, q := range s.Queues() {
		names = append(names, q.Topic()+string(rune('0'+q.QueueID())))
	}
	if len(names) != 3 || names[0] != "A7" || names[1] != "B0" || names[2] != "B1" {
		t.Fatalf("queues %v", names)
	}
	checkUnits(t, s.Get("B", 1), 0, 3)
	q := s.Get("B", 0)
	if err := s.DeleteTopic("B"); err != nil {
		t.Fatal(err)
	}
	if s.Get("B", 1) != nil || len(s.Queues()) != 1 {
		t.Fatal("topic not deleted")
	}
	if err := q.Put(1, unitN(1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("put on deleted queue: %v", err)
	}
	if _, err := fs.Stat("/cq/B"); err == nil {
		t.Fatal("topic directory left behind")
	}
}

func TestConfigValidate(t *testing.T) {
	if _, err := Open(vfs.NewMem(), Config{Dir: "/x", FileSize: 30}); !errors.Is(err, ErrConfig) {
		t.Fatal(err)
	}
	if _, err := Open(vfs.NewMem(), Config{}); !errors.Is(err, ErrConfig) {
		t.Fatal(err)
	}
}
