package clustertest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/nodeproc"
)

// Overlapping fault kinds: a second fault lands before the first is healed.
const (
	// faultKillRecovering kills a node, restarts it, kills it again while
	// it recovers (before it answers /healthz), and kills a second node
	// while the first recovers from that.
	faultKillRecovering = "kill-during-recovery"
	// faultKillInstallRecv keeps a follower down until the leader compacted
	// its log past it, restarts it, and kills it once it stored the
	// leader's snapshot and restores it (receiver side of InstallSnapshot).
	faultKillInstallRecv = "kill-during-install-recv"
	// faultKillInstallSend does the same, but kills the leader once it
	// started sending the snapshot (sender side).
	faultKillInstallSend = "kill-during-install-send"
	// faultKillMembership wipes a follower and has it rejoin, and kills the
	// leader while the new member catches up to be promoted.
	faultKillMembership = "kill-during-membership"
	// faultPartitionKill isolates one node and kills another: no quorum
	// until the killed node is back.
	faultPartitionKill = "partition-kill"
)

var overlapProcessFaults = []string{faultKillRecovering, faultKillInstallRecv, faultKillInstallSend, faultKillMembership}
var overlapNetworkFaults = []string{faultPartitionKill}

// logMark is a position in a node's log: lines written after it are new.
type logMark struct {
	p   *nodeproc.Proc
	off int64
}

func markLog(p *nodeproc.Proc) logMark {
	m := logMark{p: p}
	if fi, err := os.Stat(p.LogPath()); err == nil {
		m.off = fi.Size()
	}
	return m
}

// seen reports whether a line containing substr was logged after the mark.
func (m logMark) seen(substr string) bool {
	f, err := os.Open(m.p.LogPath())
	if err != nil {
		return false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() <= m.off {
		return false
	}
	b := make([]byte, fi.Size()-m.off)
	n, _ := f.ReadAt(b, m.off)
	return strings.Contains(string(b[:n]), substr)
}

// waitLogged polls (every 2 ms, bounded by d) until substr is logged after
// the mark, or the process exits.
func (m logMark) waitLogged(ctx context.Context, substr string, d time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !m.seen(substr) {
		select {
		case <-ctx.Done():
			return false
		case <-m.p.Exited():
			return m.seen(substr)
		case <-tick.C:
		}
	}
	return true
}

// injectOverlap applies one overlapping fault and undoes it; it returns
// handled=false for kinds it does not know.
func injectOverlap(ctx context.Context, tc *testCluster, admin *client.Client, kind string, rng *rand.Rand, tl *tally) (handled bool, err error) {
	switch kind {
	case faultKillRecovering:
		return true, tc.killDuringRecovery(ctx, rng, tl)
	case faultKillInstallRecv, faultKillInstallSend:
		return true, tc.killDuringInstall(ctx, rng, kind == faultKillInstallSend, tl)
	case faultKillMembership:
		return true, tc.killDuringMembership(ctx, admin, rng, tl)
	case faultPartitionKill:
		return true, tc.partitionKill(ctx, rng)
	}
	return false, nil
}

func (tc *testCluster) killDuringRecovery(ctx context.Context, rng *rand.Rand, tl *tally) error {
	n := len(tc.c.Nodes)
	a := rng.IntN(n)
	b := (a + 1 + rng.IntN(n-1)) % n
	if err := tc.node(a).Kill(); err != nil {
		return err
	}
	sleepFor(ctx, hold(rng)/2)
	if err := tc.restart(a); err != nil {
		return err
	}
	// Kill it again a few milliseconds into its recovery.
	sleepFor(ctx, time.Duration(rng.IntN(40))*time.Millisecond)
	hctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	healthy := tc.node(a).Healthy(hctx)
	cancel()
	if err := tc.crash(ctx, a, faultKillRecovering, rng, tl); err != nil {
		return err
	}
	if !healthy {
		tl.Evidence[faultKillRecovering+"/killed-before-healthy"]++
	}
	if err := tc.restart(a); err != nil {
		return err
	}
	// A second node dies while the first recovers: no quorum until one is back.
	if err := tc.node(b).Kill(); err != nil {
		return err
	}
	sleepFor(ctx, hold(rng)/2)
	tc.t.Logf("%s: %s killed twice (second time healthy=%v), %s killed while it recovered", faultKillRecovering, tc.id(a), healthy, tc.id(b))
	return tc.restart(b)
}

// killDuringInstall keeps a follower down until the leader compacted its
// log past it, so that the follower must be sent a snapshot, then kills the
// follower (receiver side) or the leader (sender side) during the install.
func (tc *testCluster) killDuringInstall(ctx context.Context, rng *rand.Rand, sender bool, tl *tally) error {
	l, err := tc.leader(ctx, 20*time.Second)
	if err != nil {
		return err
	}
	f, err := tc.follower(ctx, rng)
	if err != nil {
		return err
	}
	s, err := tc.node(f).Status(ctx)
	if err != nil {
		return err
	}
	if err := tc.node(f).Kill(); err != nil {
		return err
	}
	// Wait until the leader's snapshot is past the follower's last index
	// by more than the trailing logs: then the follower needs a snapshot.
	killed := time.Now()
	snap, err := tc.waitSnapshotPast(ctx, l, s.AppliedIndex+trailingLogs, 90*time.Second)
	if err != nil {
		// The workload wrote too little for the leader to compact past the
		// follower (snapshots need 512 new entries): no install to hit.
		// Not a safety problem; the evidence counter shows the miss.
		tc.t.Logf("%s: %s: %v; restarting the follower without an install", installFault(sender), tc.id(f), err)
		tl.Evidence[installFault(sender)+"/no-install-needed"]++
		return tc.restart(f)
	}
	tc.t.Logf("%s: follower %s killed at applied index %d; leader %s snapshot %d after %v",
		time.Now().Format("15:04:05.000"), tc.id(f), s.AppliedIndex, tc.id(l), snap, time.Since(killed).Round(time.Millisecond))
	kind, victim, line := faultKillInstallRecv, f, "copied to local snapshot"
	if sender {
		kind, victim, line = faultKillInstallSend, l, "installing snapshot on"
	}
	mark := markLog(tc.node(victim))
	if err := tc.restart(f); err != nil {
		return err
	}
	restarted := time.Now()
	hit := mark.waitLogged(ctx, line, 30*time.Second)
	tc.t.Logf("%s: %q on %s after %v: %v", time.Now().Format("15:04:05.000"), line, tc.id(victim), time.Since(restarted).Round(time.Millisecond), hit)
	if err := tc.crash(ctx, victim, kind, rng, tl); err != nil {
		return err
	}
	if hit {
		tl.Evidence[kind+"/killed-mid-install"]++
	}
	tc.t.Logf("%s: killed %s (follower %s, leader %s); %q logged before the kill: %v", kind, tc.id(victim), tc.id(f), tc.id(l), line, hit)
	sleepFor(ctx, hold(rng)/2)
	return tc.restart(victim)
}

// crash kills node i; on lossyfs, every other time (seeded) its power goes
// too, so the node's unsynced writes die with it mid-recovery or
// mid-install.
func (tc *testCluster) crash(ctx context.Context, i int, kind string, rng *rand.Rand, tl *tally) error {
	if err := tc.node(i).Kill(); err != nil {
		return err
	}
	if tc.mounts == nil || rng.IntN(2) == 0 {
		return nil
	}
	r, err := tc.cutPower(ctx, i, kind, rng)
	if err != nil {
		return err
	}
	tl.Evidence[kind+"/powerloss"]++
	tl.Evidence[kind+"/powerloss-bytes-dropped"] += r.DroppedBytes
	return nil
}

func installFault(sender bool) string {
	if sender {
		return faultKillInstallSend
	}
	return faultKillInstallRecv
}

// trailingLogs is nodeConfig's raft.trailing_logs.
const trailingLogs = 256

// waitSnapshotPast waits until node i's newest snapshot index is above idx.
func (tc *testCluster) waitSnapshotPast(ctx context.Context, i int, idx uint64, d time.Duration) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last := uint64(0)
	for {
		if s, err := tc.node(i).Status(ctx); err == nil {
			last = s.LastSnapshotIndex
			if last > idx {
				return last, nil
			}
		}
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("leader %s snapshot index %d not past %d within %v", tc.id(i), last, idx, d)
		case <-tick.C:
		}
	}
}

func (tc *testCluster) killDuringMembership(ctx context.Context, admin *client.Client, rng *rand.Rand, tl *tally) error {
	f, err := tc.follower(ctx, rng)
	if err != nil {
		return err
	}
	if err := tc.rejoinWiped(ctx, admin, f); err != nil {
		return err
	}
	l, err := tc.leader(ctx, 20*time.Second)
	if err != nil {
		return err
	}
	s, err := tc.node(l).Status(ctx)
	if err != nil {
		return err
	}
	promoted := false
	for _, m := range s.Members {
		if m.ID == tc.id(f) && m.Suffrage == "voter" {
			promoted = true
		}
	}
	if err := tc.node(l).Kill(); err != nil {
		return err
	}
	if !promoted {
		tl.Evidence[faultKillMembership+"/killed-before-promotion"]++
	}
	tc.t.Logf("%s: %s rejoined wiped, leader %s killed (new member already a voter: %v)", faultKillMembership, tc.id(f), tc.id(l), promoted)
	sleepFor(ctx, hold(rng)/2)
	if err := tc.restart(l); err != nil {
		return err
	}
	return tc.waitVoters(ctx, 90*time.Second)
}

func (tc *testCluster) partitionKill(ctx context.Context, rng *rand.Rand) error {
	if tc.lab == nil {
		return fmt.Errorf("fault %s needs network namespaces", faultPartitionKill)
	}
	n := len(tc.c.Nodes)
	a := rng.IntN(n)
	b := (a + 1 + rng.IntN(n-1)) % n
	if err := tc.lab.isolate(a); err != nil {
		return err
	}
	if err := tc.node(b).Kill(); err != nil {
		return err
	}
	sleepFor(ctx, hold(rng))
	if err := tc.restart(b); err != nil {
		return err
	}
	sleepFor(ctx, hold(rng)/2)
	tc.t.Logf("%s: %s isolated, %s killed and restarted", faultPartitionKill, tc.id(a), tc.id(b))
	return tc.lab.heal()
}

// dumpStacks saves every running node's goroutines (pprof, debug=2) next to
// its log, so a node that stopped answering can be diagnosed from the kept
// data dir. It is bounded by a few seconds per node.
func (tc *testCluster) dumpStacks(reason string) {
	for i, p := range tc.c.Nodes {
		if !p.Running() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		body, err := tc.adminGet(ctx, p, "/debug/pprof/goroutine?debug=2")
		cancel()
		path := p.LogPath() + ".stacks"
		if err != nil {
			body = []byte("fetching stacks: " + err.Error())
		}
		out := fmt.Appendf(nil, "=== %s %s\n", time.Now().Format(time.RFC3339Nano), reason)
		f, ferr := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if ferr != nil {
			continue
		}
		_, _ = f.Write(append(out, body...))
		_ = f.Close()
		tc.t.Logf("stacks of %s saved in %s", tc.id(i), path)
	}
}
