package clustertest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/verify"
	"github.com/raftmq/raftmq/vfs"
)

// tally counts what runs did and what the checker found. Every field below
// Faults must stay 0.
type tally struct {
	Schedules, Acked, Unknown, Failed, Commits int
	Secure                                     int // schedules run with TLS and auth
	Faults                                     map[string]int
	// Evidence counts proofs that faults hit their window or had their
	// effect (a kill before the node was healthy, a kill mid-install,
	// commitlog bytes a power loss dropped).
	Evidence map[string]int64

	Lost, Duplicated, Inconsistent, Misplaced, Gaps, OrderViolations int
	UnknownTwice, FailedPresent, Phantom, DirtyReads, ConsumerGaps   int
	OffsetRegressions, VerifyFailures, Unrecovered                   int
	SecurityFailures                                                 int // a secure cluster that was not (proveSecure)
	// Unresolved counts sends of the idempotent producers whose outcome
	// stayed unknown after resending until drainTime past the workload's
	// stop: each send must end stored once or refused.
	Unresolved int

	problems []string
}

func newTally() *tally { return &tally{Faults: map[string]int{}, Evidence: map[string]int64{}} }

func (t *tally) problem(counter *int, format string, args ...any) {
	*counter++
	if len(t.problems) < 40 {
		t.problems = append(t.problems, fmt.Sprintf(format, args...))
	}
}

func (t *tally) bad() int {
	return t.Lost + t.Duplicated + t.Inconsistent + t.Misplaced + t.Gaps + t.OrderViolations + t.UnknownTwice +
		t.FailedPresent + t.Phantom + t.DirtyReads + t.ConsumerGaps + t.OffsetRegressions + t.VerifyFailures + t.Unrecovered + t.SecurityFailures + t.Unresolved
}

func (t *tally) add(o *tally) {
	t.Schedules += o.Schedules
	t.Secure += o.Secure
	t.Acked += o.Acked
	t.Unknown += o.Unknown
	t.Failed += o.Failed
	t.Commits += o.Commits
	for k, v := range o.Faults {
		t.Faults[k] += v
	}
	for k, v := range o.Evidence {
		t.Evidence[k] += v
	}
	t.Lost += o.Lost
	t.Duplicated += o.Duplicated
	t.Inconsistent += o.Inconsistent
	t.Misplaced += o.Misplaced
	t.Gaps += o.Gaps
	t.OrderViolations += o.OrderViolations
	t.UnknownTwice += o.UnknownTwice
	t.FailedPresent += o.FailedPresent
	t.Phantom += o.Phantom
	t.DirtyReads += o.DirtyReads
	t.ConsumerGaps += o.ConsumerGaps
	t.OffsetRegressions += o.OffsetRegressions
	t.VerifyFailures += o.VerifyFailures
	t.Unrecovered += o.Unrecovered
	t.SecurityFailures += o.SecurityFailures
	t.Unresolved += o.Unresolved
	t.problems = append(t.problems, o.problems...)
}

func (t *tally) String() string {
	var kinds []string
	for k := range t.Faults {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var faults []string
	total := 0
	for _, k := range kinds {
		faults = append(faults, fmt.Sprintf("%s=%d", k, t.Faults[k]))
		total += t.Faults[k]
	}
	var evidence []string
	for k, v := range t.Evidence {
		evidence = append(evidence, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(evidence)
	return fmt.Sprintf("schedules=%d (secure %d: TLS and auth) acked=%d unknown=%d failed=%d group-commits=%d faults=%d {%s} evidence {%s}\n"+
		"lost=%d duplicated=%d inconsistent=%d misplaced=%d gaps=%d order=%d unknown-twice=%d failed-present=%d "+
		"phantom=%d dirty-reads=%d consumer-gaps=%d offset-regressions=%d verify-failures=%d unrecovered=%d security-failures=%d unresolved=%d",
		t.Schedules, t.Secure, t.Acked, t.Unknown, t.Failed, t.Commits, total, strings.Join(faults, " "), strings.Join(evidence, " "),
		t.Lost, t.Duplicated, t.Inconsistent, t.Misplaced, t.Gaps, t.OrderViolations, t.UnknownTwice, t.FailedPresent,
		t.Phantom, t.DirtyReads, t.ConsumerGaps, t.OffsetRegressions, t.VerifyFailures, t.Unrecovered, t.SecurityFailures, t.Unresolved)
}

// stored is one message as a node holds it.
type stored struct {
	id   string
	body []byte
}

// queueView is a queue's messages by offset, from min to max.
type queueView struct {
	min int64
	msg []stored // msg[k] is at offset min+k
}

// readNode reads every queue of the topic from node i directly.
func readNode(ctx context.Context, tc *testCluster, i int, tl *tally) ([queues]queueView, error) {
	var views [queues]queueView
	r, err := tc.direct(i)
	if err != nil {
		return views, err
	}
	for q := int32(0); q < queues; q++ {
		qo, err := r.QueueOffsets(ctx, &pb.QueueOffsetsRequest{Topic: topic, QueueId: q})
		if err != nil {
			return views, fmt.Errorf("node %s queue %d offsets: %w", tc.id(i), q, err)
		}
		v := queueView{min: qo.GetMinOffset()}
		for next := v.min; next < qo.GetMaxOffset(); {
			res, err := r.Pull(ctx, &pb.PullRequest{Topic: topic, QueueId: q, Offset: next, MaxMessages: 256})
			if err != nil {
				return views, fmt.Errorf("node %s queue %d pull at %d: %w", tc.id(i), q, next, err)
			}
			if len(res.GetMessages()) == 0 {
				tl.problem(&tl.Gaps, "node %s queue %d: pull at %d (max %d) returned %v and no message", tc.id(i), q, next, qo.GetMaxOffset(), res.GetStatus())
				break
			}
			for _, m := range res.GetMessages() {
				if m.GetQueueOffset() != next {
					tl.problem(&tl.Gaps, "node %s queue %d: expected offset %d, got %d", tc.id(i), q, next, m.GetQueueOffset())
				}
				v.msg = append(v.msg, stored{id: m.GetMsgId(), body: m.GetBody()})
				next = m.GetQueueOffset() + 1
			}
		}
		views[q] = v
	}
	return views, nil
}

// check compares what every node holds with what the workload was told.
func check(ctx context.Context, tc *testCluster, w *workload, tl *tally) error {
	var nodes [][queues]queueView
	for i := range tc.c.Nodes {
		v, err := readNode(ctx, tc, i, tl)
		if err != nil {
			return err
		}
		nodes = append(nodes, v)
	}
	compareReplicas(tc, nodes, tl)
	ref := nodes[0]

	// where each id lies on node 0 (identical elsewhere, or counted above)
	type pos struct {
		queue  int32
		offset int64
		body   []byte
	}
	where := map[string][]pos{}
	for q := int32(0); q < queues; q++ {
		for k, m := range ref[q].msg {
			where[m.id] = append(where[m.id], pos{q, ref[q].min + int64(k), m.body})
		}
	}
	known := map[string]*sent{}
	for _, s := range w.sends {
		known[s.id] = s
		ps := where[s.id]
		switch s.outcome {
		case acked:
			tl.Acked++
			switch {
			case len(ps) == 0:
				tl.problem(&tl.Lost, "lost: acked %s at queue %d offset %d is on no node", s.id, s.queue, s.offset)
			case len(ps) > 1:
				tl.problem(&tl.Duplicated, "duplicated: acked %s stored %d times", s.id, len(ps))
			case ps[0].queue != s.queue || ps[0].offset != s.offset:
				tl.problem(&tl.Misplaced, "misplaced: acked %s at (%d,%d) stored at (%d,%d)", s.id, s.queue, s.offset, ps[0].queue, ps[0].offset)
			case !bytes.Equal(ps[0].body, s.body):
				tl.problem(&tl.Inconsistent, "body of %s differs from what was sent", s.id)
			}
		case unknown:
			tl.Unknown++
			tl.problem(&tl.Unresolved, "unresolved: idempotent send %s still unknown after resending (stored %d times)", s.id, len(ps))
			if len(ps) > 1 {
				tl.problem(&tl.UnknownTwice, "unknown send %s stored %d times", s.id, len(ps))
			}
		case failed:
			tl.Failed++
			if len(ps) > 0 {
				tl.problem(&tl.FailedPresent, "send %s failed with a not-applied error but is stored at (%d,%d)", s.id, ps[0].queue, ps[0].offset)
			}
		}
	}
	for id := range where {
		if known[id] == nil {
			tl.problem(&tl.Phantom, "phantom: %s stored but never sent", id)
		}
	}
	checkOrder(w, tl)
	checkReads(w, ref, tl)
	return checkGroupOffsets(ctx, tc, w, tl)
}

// compareReplicas counts every queue position where a node differs from
// node 0.
func compareReplicas(tc *testCluster, nodes [][queues]queueView, tl *tally) {
	ref := nodes[0]
	for i := 1; i < len(nodes); i++ {
		for q := 0; q < queues; q++ {
			a, b := ref[q], nodes[i][q]
			if a.min != b.min || len(a.msg) != len(b.msg) {
				tl.problem(&tl.Inconsistent, "queue %d: node %s holds [%d,%d), node %s holds [%d,%d)", q,
					tc.id(0), a.min, a.min+int64(len(a.msg)), tc.id(i), b.min, b.min+int64(len(b.msg)))
			}
			for k := 0; k < min(len(a.msg), len(b.msg)); k++ {
				if a.msg[k].id != b.msg[k].id || !bytes.Equal(a.msg[k].body, b.msg[k].body) {
					tl.problem(&tl.Inconsistent, "queue %d offset %d: node %s has %s, node %s has %s", q, a.min+int64(k),
						tc.id(0), a.msg[k].id, tc.id(i), b.msg[k].id)
				}
			}
		}
	}
}

// checkOrder: a producer's acknowledged messages in one queue have
// increasing offsets in the order it sent them.
func checkOrder(w *workload, tl *tally) {
	last := map[[2]int]*sent{}
	for _, s := range w.sends { // appended in send order per producer
		if s.outcome != acked {
			continue
		}
		k := [2]int{s.producer, int(s.queue)}
		if p := last[k]; p != nil && p.offset >= s.offset {
			tl.problem(&tl.OrderViolations, "producer %d queue %d: seq %d at offset %d after seq %d at offset %d",
				s.producer, s.queue, s.seq, s.offset, p.seq, p.offset)
		}
		last[k] = s
	}
}

// checkReads: what consumers read during the run is what the queues hold at
// the end (no read of data that was later lost or replaced).
func checkReads(w *workload, ref [queues]queueView, tl *tally) {
	for _, g := range w.readGaps {
		tl.problem(&tl.ConsumerGaps, "%s", g)
	}
	for _, r := range w.reads {
		v := ref[r.queue]
		k := r.offset - v.min
		if k < 0 || k >= int64(len(v.msg)) || v.msg[k].id != r.id {
			tl.problem(&tl.DirtyReads, "consumer read %s at queue %d offset %d; the queue holds something else there", r.id, r.queue, r.offset)
		}
	}
}

// checkGroupOffsets: every node's committed offset is at least the highest
// acknowledged commit, the nodes agree, and no read-back went backwards.
func checkGroupOffsets(ctx context.Context, tc *testCluster, w *workload, tl *tally) error {
	tl.Commits += w.commits
	for _, r := range w.regressions {
		tl.problem(&tl.OffsetRegressions, "%s", r)
	}
	for q := int32(0); q < queues; q++ {
		var offs []int64
		for i := range tc.c.Nodes {
			r, err := tc.direct(i)
			if err != nil {
				return err
			}
			res, err := queryOffsetSettled(ctx, r, &pb.QueryOffsetRequest{Group: group, Topic: topic, QueueId: q})
			if err != nil {
				return fmt.Errorf("node %s query offset: %w", tc.id(i), err)
			}
			offs = append(offs, res.GetOffset())
			if res.GetOffset() < w.committed[q] {
				tl.problem(&tl.OffsetRegressions, "node %s queue %d: committed offset %d < acknowledged %d", tc.id(i), q, res.GetOffset(), w.committed[q])
			}
		}
		for i := 1; i < len(offs); i++ {
			if offs[i] != offs[0] {
				tl.problem(&tl.Inconsistent, "queue %d: group offsets differ across nodes: %v", q, offs)
				break
			}
		}
	}
	return nil
}

// verifyStopped stops every node gracefully and runs verify.Stores on all
// data dirs: each internally consistent, replicas byte-identical up to their
// common confirmOffset.
func verifyStopped(tc *testCluster, tl *tally) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tc.c.Stop(ctx); err != nil {
		tl.problem(&tl.VerifyFailures, "graceful stop: %v", err)
	}
	var report bytes.Buffer
	if err := verify.Stores(vfs.OS(), tc.c.Dirs(), &report); err != nil {
		tl.problem(&tl.VerifyFailures, "verify: %v\n%s", err, report.String())
	}
	return nil
}

// checkOwnGroupOffsets reads the consumer group's committed offsets from
// each stopped node's own store (opened on a private copy of its data, so
// nothing is changed) — QueryOffset is a leader read, so asking the nodes
// through the API would compare the leader with itself — and checks that
// every node holds at least every acknowledged commit and that they agree.
func checkOwnGroupOffsets(tc *testCluster, w *workload, tl *tally) {
	var per [][queues]int64
	for i, dir := range tc.c.Dirs() {
		offs, err := ownGroupOffsets(dir)
		if err != nil {
			tl.problem(&tl.VerifyFailures, "node %s: group offsets from its own store: %v", tc.id(i), err)
			return
		}
		for q := range offs {
			if offs[q] < w.committed[q] {
				tl.problem(&tl.OffsetRegressions, "node %s queue %d: own committed offset %d < acknowledged %d", tc.id(i), q, offs[q], w.committed[q])
			}
		}
		per = append(per, offs)
	}
	for i := 1; i < len(per); i++ {
		if per[i] != per[0] {
			tl.problem(&tl.Inconsistent, "group offsets differ: node %s %v, node %s %v", tc.id(0), per[0], tc.id(i), per[i])
		}
	}
}

// ownGroupOffsets opens a copy of the store in a stopped node's data dir and
// returns the group's committed offset per queue (-1: none).
func ownGroupOffsets(dataDir string) ([queues]int64, error) {
	var out [queues]int64
	tmp, err := os.MkdirTemp("", "raftmq-offsets-")
	if err != nil {
		return out, err
	}
	defer os.RemoveAll(tmp)
	if err := os.CopyFS(tmp, os.DirFS(filepath.Join(dataDir, "store"))); err != nil {
		return out, fmt.Errorf("copy store: %w", err)
	}
	st, err := store.Open(vfs.OS(), harnessStoreConfig(tmp))
	if err != nil {
		return out, err
	}
	defer st.Close()
	for q := range out {
		out[q] = -1
		if off, ok := st.ConsumerOffset(group, topic, int32(q)); ok {
			out[q] = off
		}
	}
	return out, nil
}

// queryOffsetSettled asks r for a group offset, asking again while the node
// answers Unavailable ("no leader elected"): an election on a loaded
// machine during the final check (seen in CI's stress phase) says nothing
// about the offsets, which the check is about. ctx bounds it.
func queryOffsetSettled(ctx context.Context, r pb.RaftMQClient, req *pb.QueryOffsetRequest) (*pb.QueryOffsetResponse, error) {
	for {
		res, err := r.QueryOffset(ctx, req)
		// A read: asking again is safe. A follower forwards it to the
		// leader, and a forwarding connection the leader's restart broke
		// answers Unknown once.
		if c := status.Code(err); c != codes.Unavailable && c != codes.Unknown || ctx.Err() != nil {
			return res, err
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w (last answer: %w)", ctx.Err(), err)
		case <-t.C:
		}
	}
}
