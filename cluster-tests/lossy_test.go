package clustertest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/lossyfs"
	"github.com/raftmq/raftmq/internal/nodeproc"
	"github.com/raftmq/raftmq/internal/testenv"
	"github.com/raftmq/raftmq/internal/testseed"
)

// Power-loss fault kinds. Every node's data dir is the root of its own
// lossyfs mount (cmd/lossyfs, one daemon per node): writes not yet covered
// by an fsync of their file, and directory changes not yet covered by an
// fsync of their directory, live only in the daemon's volatile layer. A
// power loss SIGKILLs the node, pushes the kernel's dirty pages into that
// layer, aborts the FUSE connection, drops the layer (or, torn, persists a
// seeded part of it at 512-byte sectors) and mounts the backing directory
// again: the restarted node sees what a disk would hold after the power
// went.
const (
	faultPowerLoss         = "powerloss"          // one node
	faultPowerLossMajority = "powerloss-majority" // two nodes at once
	faultPowerLossAll      = "powerloss-all"      // the whole cluster at once
)

var powerLossFaults = []string{faultPowerLoss, faultPowerLossMajority, faultPowerLossAll}

// lossyAvailable says why lossyfs mounts cannot run here (nil: they can).
func lossyAvailable() error {
	if os.Geteuid() != 0 {
		return errors.New("not root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("no /dev/fuse: %w", err)
	}
	return nil
}

var (
	lossyBuildOnce sync.Once
	lossyBin       string
	lossyBuildErr  error
)

// buildLossyFS builds cmd/lossyfs once per test process, next to the node
// binaries.
func buildLossyFS(bin nodeproc.Binaries) (string, error) {
	lossyBuildOnce.Do(func() {
		root, err := nodeproc.ModuleRoot()
		if err != nil {
			lossyBuildErr = err
			return
		}
		out := filepath.Join(filepath.Dir(bin.Node), "lossyfs")
		cmd := exec.Command("go", "build", "-trimpath", "-o", out, "./cmd/lossyfs")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			lossyBuildErr = fmt.Errorf("go build ./cmd/lossyfs: %w\n%s", err, b)
			return
		}
		lossyBin = out
	})
	return lossyBin, lossyBuildErr
}

// lossyMount is one lossyfs daemon: backing is the durable state,
// mountpoint the node's data dir, socket its control socket.
type lossyMount struct {
	backing, mountpoint, socket, logPath string

	cmd    *exec.Cmd
	exited chan struct{}
}

// mountLossy starts a lossyfs daemon serving mountpoint from backing and
// waits for its READY line.
func mountLossy(ctx context.Context, bin, backing, mountpoint, socket, logPath string) (*lossyMount, error) {
	for _, d := range []string{backing, mountpoint} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	m := &lossyMount{backing: backing, mountpoint: mountpoint, socket: socket, logPath: logPath, exited: make(chan struct{})}
	m.cmd = exec.Command(bin, "mount", "-backing", backing, "-mountpoint", mountpoint, "-control", socket)
	m.cmd.Stderr = logf
	stdout, err := m.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := m.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start lossyfs: %w", err)
	}
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err == nil && !strings.HasPrefix(line, "READY ") {
			err = fmt.Errorf("lossyfs said %q", line)
		}
		ready <- err
		_, _ = bufio.NewReader(stdout).WriteTo(discard{}) // drain until exit
	}()
	go func() {
		_ = m.cmd.Wait()
		close(m.exited)
	}()
	t := time.NewTimer(20 * time.Second)
	defer t.Stop()
	select {
	case err = <-ready:
	case <-t.C:
		err = errors.New("no READY within 20s")
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		m.stop()
		return nil, fmt.Errorf("lossyfs on %s (log %s): %w", mountpoint, logPath, err)
	}
	return m, nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// powerLoss cuts the daemon's power and waits for it to mount again.
func (m *lossyMount) powerLoss(ctx context.Context, opts lossyfs.PowerLossOptions) (lossyfs.Report, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return lossyfs.PowerLossVia(ctx, m.socket, opts)
}

// dumpGoroutines has the daemon write every goroutine's stack to its log
// (SIGUSR1), for a node process that SIGKILL did not end.
func (m *lossyMount) dumpGoroutines() {
	if m.cmd.Process != nil {
		_ = m.cmd.Process.Signal(syscall.SIGUSR1)
	}
}

// stop unmounts cleanly (SIGTERM: everything becomes durable) and waits for
// the daemon; a daemon that does not exit in 15 s is killed and the mount
// detached lazily.
func (m *lossyMount) stop() {
	if m.cmd.Process == nil {
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(15 * time.Second)
	defer t.Stop()
	select {
	case <-m.exited:
		return
	case <-t.C:
	}
	_ = m.cmd.Process.Kill()
	<-m.exited
	_ = syscall.Unmount(m.mountpoint, syscall.MNT_DETACH)
}

// emptyDir removes everything in dir but dir itself (which may be a mount
// root) and fsyncs dir, so the removal survives a power loss.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// startLossyMounts mounts one lossyfs per node at dir/n1, dir/n2, ... (the
// node data dirs) backed by dir/backing/n1, ...
func startLossyMounts(ctx context.Context, bin nodeproc.Binaries, dir string, n int) ([]*lossyMount, error) {
	lbin, err := buildLossyFS(bin)
	if err != nil {
		return nil, err
	}
	var mounts []*lossyMount
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("n%d", i)
		m, err := mountLossy(ctx, lbin, filepath.Join(dir, "backing", id), filepath.Join(dir, id),
			filepath.Join(dir, id+".lossyfs.sock"), filepath.Join(dir, id+".lossyfs.log"))
		if err != nil {
			for _, m := range mounts {
				m.stop()
			}
			return nil, err
		}
		mounts = append(mounts, m)
	}
	return mounts, nil
}

// powerLossVictims picks the nodes a power-loss kind takes down.
func powerLossVictims(kind string, n int, rng *rand.Rand) []int {
	count := map[string]int{faultPowerLoss: 1, faultPowerLossMajority: n/2 + 1, faultPowerLossAll: n}[kind]
	return rng.Perm(n)[:count]
}

// powerLoss kills the victims, cuts each one's power (torn write-back
// chosen by the seed), then restarts them all. It proves the fault
// happened: what the power loss dropped (unsynced bytes, file sizes,
// directory entries) goes into the tally's evidence. A power loss that
// found nothing unsynced on any victim was no more than a kill (a node that
// had just restarted and written nothing yet): it is repeated, up to
// powerLossTries times, once the cluster serves again.
func (tc *testCluster) powerLoss(ctx context.Context, kind string, rng *rand.Rand, tl *tally) error {
	if tc.mounts == nil {
		return fmt.Errorf("fault %s needs lossyfs mounts (root and /dev/fuse)", kind)
	}
	for try := 1; ; try++ {
		effect, err := tc.powerLossOnce(ctx, kind, rng, tl)
		if err != nil || effect || try == powerLossTries {
			return err
		}
		tl.Evidence[kind+"/tries-without-effect"]++
		tc.t.Logf("%s: the power loss dropped nothing unsynced; again once the cluster serves and writes (try %d)", kind, try+1)
		if err := tc.waitServing(ctx, 60*time.Second); err != nil {
			return err
		}
		tc.waitWriting(ctx, 15*time.Second)
	}
}

// cutPower cuts the power of killed node i (torn write-back chosen by the
// seed) and logs what it dropped.
func (tc *testCluster) cutPower(ctx context.Context, i int, kind string, rng *rand.Rand) (lossyfs.Report, error) {
	opts := lossyfs.PowerLossOptions{Seed: rng.Int64(), Torn: rng.IntN(2) == 0}
	r, err := tc.mounts[i].powerLoss(ctx, opts)
	if err != nil {
		return r, fmt.Errorf("power loss of %s: %w", tc.id(i), err)
	}
	tc.t.Logf("%s: power loss of %s: %s", kind, tc.id(i), r)
	return r, nil
}

// powerLossTries bounds the tries of one power-loss fault.
const powerLossTries = 4

// powerLossOnce is one try of powerLoss; effect tells whether it dropped
// anything.
func (tc *testCluster) powerLossOnce(ctx context.Context, kind string, rng *rand.Rand, tl *tally) (effect bool, err error) {
	victims := powerLossVictims(kind, len(tc.c.Nodes), rng)
	for _, v := range victims {
		if err := tc.node(v).Kill(); err != nil {
			return false, err
		}
	}
	for _, v := range victims {
		r, err := tc.cutPower(ctx, v, kind, rng)
		if err != nil {
			return false, err
		}
		tl.Evidence[kind+"/bytes-dropped"] += r.DroppedBytes
		tl.Evidence[kind+"/dirents-dropped"] += int64(r.DroppedDirents)
		tl.Evidence[kind+"/sizes-dropped"] += int64(r.DroppedSizes)
		tl.Evidence[kind+"/nodes"]++
		effect = effect || r.DroppedBytes > 0 || r.DroppedDirents > 0 || r.DroppedSizes > 0
	}
	sleepFor(ctx, hold(rng)/2) // the outage lasts a while
	for _, v := range victims {
		if err := tc.restart(v); err != nil {
			return effect, err
		}
	}
	return effect, nil
}

// waitWriting waits (bounded by d) until every node's commitlog grew past
// what it held when the wait began. A power loss that found nothing
// unsynced usually hit nodes that had just restarted: cut again at once,
// before they applied anything new, it would find nothing again (under CPU
// load all four tries did). A cluster that writes nothing within d (no
// workload, or a stalled one) is logged and cut anyway; checkPowerLossEffect
// judges the outcome.
func (tc *testCluster) waitWriting(ctx context.Context, d time.Duration) {
	victims := make([]int, len(tc.c.Nodes))
	for i := range victims {
		victims[i] = i
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := make(map[int]int64, len(victims))
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		waiting := 0
		for _, v := range victims {
			s, err := tc.node(v).Status(ctx)
			if err != nil {
				waiting++
				continue
			}
			first, seen := start[v]
			if !seen {
				start[v] = s.MaxOffset
			}
			if !seen || s.MaxOffset <= first {
				waiting++
			}
		}
		if waiting == 0 {
			return
		}
		select {
		case <-ctx.Done():
			tc.t.Logf("power loss: %d of %d nodes wrote nothing new within %v", waiting, len(victims), d)
			return
		case <-tick.C:
		}
	}
}

// checkPowerLossEffect proves the schedule's power losses happened: each
// power-loss kind that ran dropped something unsynced.
func checkPowerLossEffect(tl *tally) {
	for _, kind := range powerLossFaults {
		dropped := tl.Evidence[kind+"/bytes-dropped"] + tl.Evidence[kind+"/dirents-dropped"] + tl.Evidence[kind+"/sizes-dropped"]
		if tl.Faults[kind] > 0 && dropped == 0 {
			tl.problem(&tl.Unrecovered, "%s ran %d times but dropped nothing unsynced (bytes, sizes, directory entries): the fault had no effect", kind, tl.Faults[kind])
		}
	}
}

// TestPowerLossOfWholeClusterAfterBootstrap: the whole cluster loses power
// right after it bootstrapped and acknowledged one message. Found by
// TestChaos on lossyfs (powerloss-all as the first fault): the nodes
// created raft/ and the store's directories without fsyncing their
// parents, so the power loss took the bootstrap configuration and the
// acknowledged message with it and the restarted nodes found "no known
// peers".
func TestPowerLossOfWholeClusterAfterBootstrap(t *testing.T) {
	if err := lossyAvailable(); err != nil {
		testenv.Require(t, "lossyfs needs root and /dev/fuse: "+err.Error())
	}
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(uint64(seed), 0x10557))
	ctx := context.Background()
	tc := mustStartCluster(t, "powerloss-boot", clusterOptions{lossy: true})
	cl := tc.mustClient(t, 0)
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	res, err := cl.Send(sctx, client.NewMessage(topic, []byte("acknowledged before the power went")))
	cancel()
	if err != nil || res[0].Err != nil {
		t.Fatalf("send: %v %v", err, res)
	}
	tl := newTally()
	if err := tc.powerLoss(ctx, faultPowerLossAll, rng, tl); err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	if tl.Evidence[faultPowerLossAll+"/nodes"] != 3 {
		t.Fatalf("seed %d: power loss hit %d nodes, want 3", seed, tl.Evidence[faultPowerLossAll+"/nodes"])
	}
	if err := tc.waitServing(ctx, 60*time.Second); err != nil {
		t.Fatalf("seed %d: cluster not serving after the power came back: %v", seed, err)
	}
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	// Through the client's leader (the old one: maybe a follower now) and
	// through every node first: a node still replaying its log right after
	// the power came back must not answer that the acknowledged offset does
	// not exist (it did, through the stale leader, before lookups beyond a
	// node's applied log became leader reads).
	readers := []*client.Client{cl}
	for i := range tc.c.Nodes {
		rc, err := tc.newClient(rctx, i, true)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		readers = append(readers, rc)
	}
	for i, r := range readers {
		got, err := r.QueryByOffset(rctx, res[0].PhysicalOffset)
		if err != nil {
			t.Fatalf("seed %d: reader %d: acknowledged message at %d lost: %v", seed, i, res[0].PhysicalOffset, err)
		}
		if string(got.Body) != "acknowledged before the power went" {
			t.Fatalf("seed %d: reader %d: message at %d reads %q", seed, i, res[0].PhysicalOffset, got.Body)
		}
	}
}
