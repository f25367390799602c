package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/raftmq/raftmq/internal/testenv"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/transport"
)

// Three nodes, each with its data (store, Raft log, snapshots) on its own
// 32 MiB tmpfs, and disks filled for real:
//   - a follower whose disk fills while it applies waits for space instead
//     of exiting, the cluster goes on with the other two, and it catches up
//     once space is freed;
//   - with both followers' disks above DiskWarningRatio the leader refuses
//     sends (no quorum has room), and takes them again when one has room;
//   - produced until every disk is above the ratio, the leader refuses
//     sends with RESOURCE_EXHAUSTED, and a topic delete (its consume-queue
//     files) frees enough space for writes to resume;
//
// and at the end no node stopped, the replicas are identical, and every
// acknowledged message reads back on every node.
func TestClusterFullDisks(t *testing.T) {
	testenv.Require(t, tmpfsWhy())
	const fsSize = 32 << 20
	mounts := map[string]string{}
	c := startClusterWith(t, 3, func(cfg *Config) {
		mounts[cfg.ID] = mountTmpfs(t, fsSize)
		cfg.Dir = filepath.Join(mounts[cfg.ID], "data")
		// No retention by disk use: the test frees space itself.
		cfg.Store.DiskMaxUsedSpaceRatio, cfg.Store.CleanForciblyRatio = 100, 100
		cfg.Store.ConsumeQueueFileSize = 3200 * 20 // 64,000 bytes a queue file
		cfg.Store.PreallocateSegments = 0
		// raft-boltdb grows its file in small steps; raft-wal would take
		// 64 MiB up front for its first segment.
		cfg.Raft.LogStore = LogStoreBolt
		// The test is about disks, not failover: timeouts that a loaded
		// machine does not trip (CI saw a leader step down 1 s after the
		// start with the 300 ms default of these tests). A leader change
		// that comes anyway is followed by sendLeader.
		cfg.Raft.HeartbeatTimeout, cfg.Raft.ElectionTimeout, cfg.Raft.LeaderLeaseTimeout = time.Second, time.Second, 500*time.Millisecond
	})
	_, f1, _ := c.roles()
	acked := &ackedLog{c: c}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if err := c.leader().CreateTopic(ctx, store.TopicConfig{Name: "wide", Queues: 32, Perm: 6}); err != nil {
		t.Fatal(err)
	}
	wide := make([]message.Message, 32)
	for i := range wide {
		wide[i] = message.Message{Topic: "wide", QueueID: int32(i % 32), BornTimestamp: 1, Body: fmt.Appendf(nil, "wide-%d", i)}
	}
	if err := acked.sendLeader(ctx, wide); err != nil {
		t.Fatal(err)
	}

	// 1. A follower's disk fills under it while it applies.
	// The commitlog within 48 KiB of a segment's end (entries of 17 KiB
	// cannot step past that window), on the follower too.
	segSize := c.cfgs[0].Store.CommitLogFileSize
	waitFor(t, "the leader's commitlog near a segment's end", time.Minute, func() bool {
		if err := acked.sendLeader(ctx, batch("T", "pre", 16, 1024)); err != nil {
			t.Fatal(err)
		}
		return c.leader().Store().Stats().MaxOffset%segSize > segSize-48<<10
	})
	c.converge()
	// Less free space than the follower's next segment takes, more than
	// its Raft log needs for the three entries that fill the current one.
	ballast1 := fillDisk(t, mounts[f1.cfg.ID], leaveFree(200<<10))
	waitFor(t, "the follower to wait for disk space", time.Minute, func() bool {
		if err := acked.sendLeader(ctx, batch("T", "f1full", 16, 1024)); err != nil {
			t.Fatalf("send while one follower's disk is full: %v", err)
		}
		return f1.fsm.Stats().WaitingForSpace
	})
	t.Logf("follower %s waits for disk space (%d%% used); sends go on", f1.cfg.ID, f1.diskUsedPercent())
	for range 5 {
		if err := acked.sendLeader(ctx, batch("T", "f1wait", 16, 1024)); err != nil {
			t.Fatalf("send while one follower waits for space: %v", err)
		}
	}
	removeFile(t, ballast1)
	waitFor(t, "the follower to resume applying", time.Minute, func() bool {
		return !f1.fsm.Stats().WaitingForSpace && f1.fsm.Stats().SpaceWaits > 0
	})
	c.converge()

	// 2. Both followers above the warning ratio: no quorum has room.
	_, f1, f2 := c.roles()
	b1 := fillDisk(t, mounts[f1.cfg.ID], usedPercent(93))
	b2 := fillDisk(t, mounts[f2.cfg.ID], usedPercent(93))
	var refused error
	waitFor(t, "the leader to refuse sends for its followers' disks", 15*time.Second, func() bool {
		refused = acked.sendLeader(ctx, batch("T", "quorum", 1, 1024))
		return refused != nil
	})
	if !errors.Is(refused, transport.ErrDiskFull) || !strings.Contains(refused.Error(), "no quorum") {
		t.Fatalf("send with both followers' disks full: %v, want ErrDiskFull for the quorum", refused)
	}
	t.Logf("refused: %v", refused)
	removeFile(t, b2)
	waitFor(t, "sends to resume with one follower's disk freed", 15*time.Second, func() bool {
		return acked.sendLeader(ctx, batch("T", "quorum", 1, 1024)) == nil
	})
	removeFile(t, b1)

	// 3. Every disk above the ratio, then a topic delete frees space. One
	// producer sending 4 KiB at a time writes a few MB/s: a peer's disk
	// report (every 250 ms) comes before the 3.2 MiB of headroom above the
	// ratio is gone, as on a real disk whose headroom is gigabytes.
	refused = nil
	for i := 0; refused == nil; i++ {
		if i == 20000 {
			t.Fatal("20,000 sends and no disk is full")
		}
		refused = acked.sendLeader(ctx, batch("T", "fill", 4, 1024))
	}
	if !errors.Is(refused, transport.ErrDiskFull) {
		t.Fatalf("send on full disks: %v, want ErrDiskFull", refused)
	}
	t.Logf("refused: %v (disks %d%% %d%% %d%%)", refused, c.leader().diskUsedPercent(), f1.diskUsedPercent(), f2.diskUsedPercent())
	if err := c.leader().DeleteTopic(ctx, "wide"); err != nil {
		t.Fatal(err)
	}
	acked.forget("wide")
	waitFor(t, "sends to resume after the topic delete", 15*time.Second, func() bool {
		return acked.sendLeader(ctx, batch("T", "after", 1, 1024)) == nil
	})

	for _, n := range c.nodes {
		select {
		case err := <-n.fatal:
			t.Fatalf("node %s stopped: %v", n.cfg.ID, err)
		default:
		}
	}
	c.assertIdentical()
	for _, n := range c.nodes {
		acked.verify(t, n)
	}
	t.Logf("%d acknowledged messages read back on every node", acked.count())
}

// ackedLog records every acknowledged message by topic, queue and offset.
type ackedLog struct {
	c    *cluster
	msgs map[string]map[[2]int64][]byte // topic -> (queue, offset) -> body
}

// sendLeader sends ms to the current leader, and again to the next one
// while the answer says leadership moved (not the leader, or an outcome
// lost with the leadership: a message stored twice is at two positions,
// and each position checked is one acknowledged). Any other error is
// returned.
func (a *ackedLog) sendLeader(ctx context.Context, ms []message.Message) error {
	for try := 0; ; try++ {
		l := a.c.leader()
		err := a.send(ctx, l, ms)
		moved := errors.Is(err, transport.ErrNotLeader) || errors.Is(err, transport.ErrOutcomeUnknown)
		if !moved || try == 5 || ctx.Err() != nil {
			return err
		}
		a.c.t.Logf("send to %s: %v; again to the leader", l.cfg.ID, err)
	}
}

// roles is the ready leader and the two followers of a three-node cluster.
func (c *cluster) roles() (l, f1, f2 *Node) {
	c.t.Helper()
	l = c.leader()
	var followers []*Node
	for _, n := range c.nodes {
		if n != l {
			followers = append(followers, n)
		}
	}
	return l, followers[0], followers[1]
}

func (a *ackedLog) send(ctx context.Context, l *Node, ms []message.Message) error {
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := l.Send(sctx, ms)
	if err != nil {
		return err
	}
	if a.msgs == nil {
		a.msgs = map[string]map[[2]int64][]byte{}
	}
	for i, r := range res {
		if r.Err != nil {
			return fmt.Errorf("message %d: %w", i, r.Err)
		}
		m := ms[i]
		if a.msgs[m.Topic] == nil {
			a.msgs[m.Topic] = map[[2]int64][]byte{}
		}
		a.msgs[m.Topic][[2]int64{int64(m.QueueID), r.QueueOffset}] = m.Body
	}
	return nil
}

func (a *ackedLog) forget(topic string) { delete(a.msgs, topic) }

func (a *ackedLog) count() int {
	n := 0
	for _, q := range a.msgs {
		n += len(q)
	}
	return n
}

// verify reads every acknowledged message back from n's store.
func (a *ackedLog) verify(t *testing.T, n *Node) {
	t.Helper()
	for topic, byPos := range a.msgs {
		for pos, body := range byPos {
			r, err := n.Store().GetMessages(topic, int32(pos[0]), pos[1], 1, 0, "")
			if err != nil || r.Status != store.Found || len(r.Messages) != 1 || !bytes.Equal(r.Messages[0].Body, body) {
				t.Fatalf("node %s: %s queue %d offset %d: %v %v, want the acknowledged body", n.cfg.ID, topic, pos[0], pos[1], err, r.Status)
			}
		}
	}
}

// batch is n messages of size bytes to topic's four queues.
func batch(topic, prefix string, n, size int) []message.Message {
	out := msgs(topic, prefix, n)
	for i := range out {
		out[i].Body = append(out[i].Body, bytes.Repeat([]byte{'x'}, size-len(out[i].Body))...)
	}
	return out
}

// tmpfsWhy says why this machine cannot mount a tmpfs, or "".
func tmpfsWhy() string {
	if os.Geteuid() != 0 {
		return "mounting a tmpfs needs root"
	}
	return ""
}

// mountTmpfs mounts a tmpfs of size bytes on a new directory, unmounted
// when the test ends (after the nodes on it closed: cleanups run last
// registered first).
func mountTmpfs(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// A fill target: how many bytes a ballast file takes, from the file
// system's total and free bytes.
type fillTarget func(total, free int64) int64

// leaveFree leaves n bytes free.
func leaveFree(n int64) fillTarget {
	return func(_, free int64) int64 { return free - n }
}

// usedPercent fills the file system to p % used.
func usedPercent(p int64) fillTarget {
	return func(total, free int64) int64 { return free - total*(100-p)/100 }
}

// fillDisk writes a ballast file into dir as big as target says and
// returns its path.
func fillDisk(t *testing.T, dir string, target fillTarget) string {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	total, free := int64(st.Blocks)*st.Bsize, int64(st.Bfree)*st.Bsize
	n := target(total, free)
	if n <= 0 {
		t.Fatalf("%s already past the fill target: %d of %d bytes free", dir, free, total)
	}
	f, err := os.CreateTemp(dir, "ballast-")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(make([]byte, n)); err != nil {
		t.Fatalf("ballast of %d bytes in %s (%d free): %v", n, dir, free, err)
	}
	return f.Name()
}

func removeFile(t *testing.T, name string) {
	t.Helper()
	if err := os.Remove(name); err != nil {
		t.Fatal(err)
	}
}
