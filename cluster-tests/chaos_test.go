package clustertest

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/nodeproc"
	"github.com/raftmq/raftmq/internal/testenv"
	"github.com/raftmq/raftmq/internal/testseed"
	"github.com/raftmq/raftmq/wire"
)

var chaosDuration = flag.Duration("chaos.duration", 0, "run chaos schedules back to back for this long (0: one short schedule)")
var chaosPlain = flag.Bool("chaos.plain", false, "run the nodes without TLS and authentication (default: TLS on every port, mutual TLS between nodes, an auth file; the harness uses the CA and an admin token)")
var chaosKinds = flag.String("chaos.kinds", "", "comma-separated fault kinds to run instead of every kind (focus or replay)")

// Fault kinds.
const (
	faultKill       = "kill9"
	faultPause      = "pause"
	faultRestart    = "restart"
	faultTransfer   = "transfer"
	faultMembership = "membership"
	faultIsolate    = "isolate"
	faultIsolateLdr = "isolate-leader"
	faultBridge     = "bridge"
	faultLatency    = "latency"
	faultDropConns  = "drop-conns"
)

var processFaults = append([]string{faultKill, faultPause, faultRestart, faultTransfer, faultMembership}, overlapProcessFaults...)
var networkFaults = append([]string{faultIsolate, faultIsolateLdr, faultBridge, faultLatency, faultDropConns}, overlapNetworkFaults...)

func TestChaos(t *testing.T) {
	seed := testseed.Seed(t)
	env := chaosEnvironment(t)
	total := newTally()
	if *chaosDuration == 0 {
		total.add(runSchedule(t, seed, env, 0))
	} else {
		deadline := time.Now().Add(*chaosDuration)
		for i := int64(0); time.Now().Before(deadline); i++ {
			s := seed + i
			t.Run(fmt.Sprintf("schedule-%d-seed-%d", i, s), func(t *testing.T) {
				total.add(runSchedule(t, s, env, 12))
			})
			t.Logf("after %d schedules (%v left): %s", i+1, time.Until(deadline).Round(time.Second), total)
		}
	}
	t.Logf("chaos tally (seed %d, %s): %s", seed, env.mode(), total)
	fmt.Printf("chaos tally (seed %d, %s): %s\n", seed, env.mode(), total)
	if total.bad() > 0 {
		t.Errorf("seed %d: %d problems found", seed, total.bad())
	}
}

// chaosEnv is what the machine lets the chaos test do.
type chaosEnv struct {
	net   bool // network namespaces: network faults
	lossy bool // lossyfs mounts: power-loss faults
	// secure: nodes run with TLS and an auth file (not -chaos.plain).
	secure bool
}

// mode names how the nodes ran, for the tally.
func (e chaosEnv) mode() string {
	if e.secure {
		return "secure: TLS, mutual TLS between nodes, auth"
	}
	return "plain: no TLS, no auth (-chaos.plain)"
}

// chaosEnvironment finds out which fault families can run. Without root,
// netns or FUSE they are skipped loudly; under CI=true that is a failure.
func chaosEnvironment(t *testing.T) chaosEnv {
	env := chaosEnv{net: true, lossy: true, secure: !*chaosPlain}
	t.Logf("nodes run %s", env.mode())
	if err := netAvailable(); err != nil {
		if testenv.InCI() {
			t.Fatalf("CI=true but network faults cannot run: %v", err)
		}
		env.net = false
		t.Logf("SKIPPED network faults (they need root, ip, iptables and ss; fail under CI=true): %v", err)
	}
	if err := lossyAvailable(); err != nil {
		if testenv.InCI() {
			t.Fatalf("CI=true but power-loss faults cannot run: %v", err)
		}
		env.lossy = false
		t.Logf("SKIPPED power-loss faults (they need root and /dev/fuse for lossyfs; fail under CI=true): %v", err)
	}
	return env
}

// scheduleKinds is every enabled fault kind once in a seeded order, then
// extra random ones.
func scheduleKinds(rng *rand.Rand, env chaosEnv, extra int) []string {
	kinds := append([]string(nil), processFaults...)
	if env.net {
		kinds = append(kinds, networkFaults...)
	}
	if env.lossy {
		kinds = append(kinds, powerLossFaults...)
	}
	if *chaosKinds != "" {
		kinds = strings.Split(*chaosKinds, ",")
	}
	rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	all := append([]string(nil), kinds...)
	for i := 0; i < extra; i++ {
		kinds = append(kinds, all[rng.IntN(len(all))])
	}
	return kinds
}

// runSchedule runs one cluster through one seeded fault schedule and checks
// it; problems are reported through t with the seed.
func runSchedule(t *testing.T, seed int64, env chaosEnv, extra int) *tally {
	tl := newTally()
	tl.Schedules = 1
	if env.secure {
		tl.Secure = 1
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
	kinds := scheduleKinds(rng, env, extra)
	t.Logf("seed %d schedule: %s", seed, strings.Join(kinds, " "))
	dir := nodeproc.TempDir(t, "chaos")
	ctx := context.Background()
	tc, err := startTestCluster(ctx, t, dir, clusterOptions{net: env.net, lossy: env.lossy, secure: env.secure})
	if err != nil {
		t.Fatalf("seed %d: start cluster: %v", seed, err)
	}
	t.Cleanup(tc.close)
	if env.secure {
		proveSecure(ctx, tc, tl, "start")
	}
	w, err := startWorkload(ctx, tc, seed)
	if err != nil {
		t.Fatalf("seed %d: start workload: %v", seed, err)
	}
	defer w.close()
	admin, err := tc.newClient(ctx, 0, false)
	if err != nil {
		t.Fatalf("seed %d: admin client: %v", seed, err)
	}
	defer admin.Close()
	w.wait(time.Second) // let the workload warm up before the first fault
	for n, kind := range kinds {
		start := time.Now()
		handled, err := injectOverlap(ctx, tc, admin, kind, rng, tl)
		if !handled {
			err = inject(ctx, tc, admin, kind, rng, tl)
		}
		tl.Faults[kind]++
		if err == nil {
			err = tc.waitServing(ctx, 60*time.Second)
		}
		t.Logf("fault %d/%d %s: %v (%v)", n+1, len(kinds), kind, errText(err), time.Since(start).Round(time.Millisecond))
		if err != nil {
			tc.dumpStacks(fmt.Sprintf("fault %s: %v", kind, err))
			tl.problem(&tl.Unrecovered, "seed %d: fault %s: %v", seed, kind, err)
			_ = tc.healAll()
			if err := tc.waitServing(ctx, 60*time.Second); err != nil {
				break
			}
		}
	}
	w.wait(time.Second)
	w.close()
	if err := tc.healAll(); err != nil {
		tl.problem(&tl.Unrecovered, "heal: %v", err)
	}
	err = tc.waitServing(ctx, 60*time.Second)
	if err == nil {
		err = tc.converged(ctx, 60*time.Second)
	}
	if err != nil {
		tc.dumpStacks(fmt.Sprintf("after healing: %v", err))
		tl.problem(&tl.Unrecovered, "after healing: %v", err)
	}
	if env.secure && err == nil { // a cluster that did not heal is reported above
		proveSecure(ctx, tc, tl, "end")
	}
	// The producers' resends of unknown outcomes: by the client inside a
	// Send, and by the workload after a Send that still ended unknown.
	tl.Evidence["idempotent/client-resends"] += w.clientResends()
	tl.Evidence["idempotent/resent-batches"] += int64(w.resent)
	writeAckLog(filepath.Join(dir, "ack.log"), w)
	for _, why := range w.failedWhy {
		t.Logf("failed send (the client says nothing was applied): %s", why)
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	if err := check(cctx, tc, w, tl); err != nil {
		tl.problem(&tl.Unrecovered, "check: %v", err)
	}
	cancel()
	_ = verifyStopped(tc, tl)
	checkOwnGroupOffsets(tc, w, tl)
	checkPowerLossEffect(tl)
	t.Logf("seed %d: %s", seed, tl)
	if tl.Acked == 0 {
		tl.problem(&tl.Unrecovered, "seed %d: no send was acknowledged: the schedule tested nothing", seed)
	}
	if tl.bad() > 0 {
		t.Errorf("seed %d (replay with -seed=%d): %d problems; data dirs and logs kept in %s:\n%s",
			seed, seed, tl.bad(), dir, strings.Join(tl.problems, "\n"))
	}
	return tl
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// hold is how long a fault lasts while the workload runs.
func hold(rng *rand.Rand) time.Duration {
	return time.Duration(1500+rng.IntN(2000)) * time.Millisecond
}

// sleepFor waits a fault's hold time; it is the fault's duration, not a
// stand-in for a condition.
func sleepFor(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// inject applies one fault, holds it, and undoes it.
func inject(ctx context.Context, tc *testCluster, admin *client.Client, kind string, rng *rand.Rand, tl *tally) error {
	n := len(tc.c.Nodes)
	victim := rng.IntN(n)
	switch kind {
	case faultKill:
		if err := tc.node(victim).Kill(); err != nil {
			return err
		}
		sleepFor(ctx, hold(rng))
		return tc.restart(victim)
	case faultPause:
		if err := tc.node(victim).Pause(); err != nil {
			return err
		}
		sleepFor(ctx, hold(rng))
		return tc.node(victim).Resume()
	case faultRestart:
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		code, err := tc.node(victim).Stop(sctx)
		cancel()
		if err != nil || code != 0 {
			return fmt.Errorf("graceful stop of %s: exit %d: %v; log ends:\n%s", tc.id(victim), code, err, tc.node(victim).LogTail(10))
		}
		return tc.restart(victim)
	case faultTransfer:
		f, err := tc.follower(ctx, rng)
		if err != nil {
			return err
		}
		tctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err = admin.Transfer(tctx, tc.id(f))
		cancel()
		if err != nil {
			tc.t.Logf("transfer to %s: %v (not a safety problem)", tc.id(f), err)
		}
		sleepFor(ctx, hold(rng))
		return nil
	case faultMembership:
		f, err := tc.follower(ctx, rng)
		if err != nil {
			return err
		}
		if err := tc.rejoinWiped(ctx, admin, f); err != nil {
			return err
		}
		return tc.waitVoters(ctx, 90*time.Second)
	case faultPowerLoss, faultPowerLossMajority, faultPowerLossAll:
		return tc.powerLoss(ctx, kind, rng, tl)
	}
	if tc.lab == nil {
		return fmt.Errorf("fault %s needs network namespaces", kind)
	}
	switch kind {
	case faultIsolate, faultIsolateLdr:
		if kind == faultIsolateLdr {
			l, err := tc.leader(ctx, 20*time.Second)
			if err != nil {
				return err
			}
			victim = l
		}
		if err := tc.lab.isolate(victim); err != nil {
			return err
		}
	case faultBridge:
		a, c := (victim+1)%n, (victim+2)%n
		if err := tc.lab.cut(a, c); err != nil {
			return err
		}
	case faultLatency:
		if err := tc.lab.slow(victim, time.Duration(50+rng.IntN(200))*time.Millisecond); err != nil {
			return err
		}
	case faultDropConns:
		if err := tc.lab.lossy(victim, 0.1+0.2*rng.Float64()); err != nil {
			return err
		}
		if err := tc.lab.killConns(victim); err != nil {
			tc.t.Logf("ss -K: %v", err)
		}
		sleepFor(ctx, hold(rng)/2)
		if err := tc.lab.killConns(victim); err != nil {
			tc.t.Logf("ss -K: %v", err)
		}
	default:
		return fmt.Errorf("unknown fault %q", kind)
	}
	sleepFor(ctx, hold(rng))
	if kind == faultLatency {
		proxied := tc.lab.proxied()
		tc.t.Logf("latency: %d raft connections went through the delay proxies", proxied)
		tl.Evidence[faultLatency+"/proxied-conns"] += int64(proxied)
		if proxied == 0 {
			_ = tc.lab.heal()
			return fmt.Errorf("latency fault on %s: no raft connection went through the delay proxies", tc.id(victim))
		}
	}
	return tc.lab.heal()
}

// waitVoters waits until the leader lists every node as a voter.
func (tc *testCluster) waitVoters(ctx context.Context, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	why := ""
	for {
		l, err := tc.c.Leader(ctx)
		if err == nil {
			s, err := tc.node(l).Status(ctx)
			if err == nil {
				voters := 0
				for _, m := range s.Members {
					if m.Suffrage == wire.SuffrageVoter {
						voters++
					}
				}
				if voters == len(tc.c.Nodes) {
					return nil
				}
				why = fmt.Sprintf("%d voters: %+v", voters, s.Members)
			}
		} else if why == "" || ctx.Err() == nil {
			why = err.Error()
		} else {
			// A poll cut short by this wait's own deadline does not hide
			// what the last full poll saw (a healthy node's /status then
			// reads as "context deadline exceeded").
			why = fmt.Sprintf("%s (then, at the deadline: %v)", why, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("membership not restored within %v: %s", d, why)
		case <-tick.C:
		}
	}
}

// writeAckLog writes the producers' outcomes in raftmq produce --ack-log
// form (unknown and failed sends as "? ?", failed ones marked).
func writeAckLog(path string, w *workload) {
	f, err := os.Create(path)
	if err != nil {
		return
	}
	defer f.Close()
	bw := bufio.NewWriter(f)
	defer bw.Flush()
	for _, s := range w.sends {
		switch s.outcome {
		case acked:
			fmt.Fprintf(bw, "%s\t%s\t%d\t%d\n", s.id, topic, s.queue, s.offset)
		case unknown:
			fmt.Fprintf(bw, "%s\t%s\t?\t?\n", s.id, topic)
		case failed:
			fmt.Fprintf(bw, "%s\t%s\t?\t?\tfailed\n", s.id, topic)
		}
	}
}
