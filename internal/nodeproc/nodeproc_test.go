package nodeproc_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/nodeproc"
)

func buildOrFatal(t *testing.T) nodeproc.Binaries {
	t.Helper()
	bin, err := nodeproc.Build()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// alive reports whether a process with this PID exists and is not a zombie
// of ours (the harness reaps every child, so a reaped PID is gone).
func alive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

// TestClusterKillLeaderRestartStop starts three real nodes on loopback,
// kills the leader with SIGKILL, waits for a new leader among the other two,
// restarts the killed node, sees it healthy and following, and checks that
// Stop leaves none of the PIDs alive and every node exited 0 on SIGTERM.
func TestClusterKillLeaderRestartStop(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real node processes")
	}
	bin := buildOrFatal(t)
	dir := nodeproc.TempDir(t, "nodeproc")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args, err := nodeproc.SmallStoreArgs(dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := nodeproc.StartCluster(ctx, bin, nodeproc.ClusterOptions{N: 3, Dir: dir, Args: args})
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	t.Cleanup(func() {
		_ = c.Stop(context.Background())
		for _, pid := range pids {
			if alive(pid) {
				t.Errorf("pid %d still alive after Stop", pid)
			}
		}
	})
	for _, p := range c.Nodes {
		pids = append(pids, p.PID())
	}

	old, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	oldID := c.Nodes[old].Spec().ID
	if out, err := c.CLI(ctx, "cluster", "status"); err != nil || !strings.Contains(string(out), oldID) {
		t.Fatalf("cluster status: %v\n%s", err, out)
	}
	if err := c.Nodes[old].Kill(); err != nil {
		t.Fatal(err)
	}
	if code, err := c.Nodes[old].ExitCode(); err != nil || code != -1 {
		t.Fatalf("killed node exit code %d, %v; want -1 (signalled)", code, err)
	}
	if alive(pids[old]) {
		t.Fatalf("killed leader pid %d is still alive", pids[old])
	}
	next, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if next == old {
		t.Fatalf("leader after kill is the killed node %s", oldID)
	}

	if err := c.Nodes[old].Restart(); err != nil {
		t.Fatal(err)
	}
	pids = append(pids, c.Nodes[old].PID())
	if c.Nodes[old].Spec().Bootstrap {
		t.Fatal("Restart kept Bootstrap")
	}
	if err := c.Nodes[old].WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Leader(ctx); err != nil || got == old {
		t.Fatalf("leader after restart = %d, %v; want a node other than the restarted %s", got, err, oldID)
	}
	st, err := c.Nodes[old].Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.ID != oldID || len(st.Members) != 3 {
		t.Fatalf("restarted node status: %+v", st)
	}

	if err := c.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("pid %d alive after Stop", pid)
		}
	}
}

// TestPauseResumeAndStopPaused checks SIGSTOP/SIGCONT on a single node and
// that Stop ends a paused process (SIGTERM is delivered after SIGCONT).
func TestPauseResumeAndStopPaused(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real node process")
	}
	bin := buildOrFatal(t)
	dir := nodeproc.TempDir(t, "nodeproc")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args, err := nodeproc.SmallStoreArgs(dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := nodeproc.StartCluster(ctx, bin, nodeproc.ClusterOptions{N: 1, Dir: dir, Args: args})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	p := c.Nodes[0]
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	healthy := p.Healthy(short)
	cancelShort()
	if healthy {
		t.Fatal("paused node answered /healthz")
	}
	if err := p.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	code, err := p.Stop(ctx)
	if err != nil || code != 0 {
		t.Fatalf("stop of a paused node: code %d, %v", code, err)
	}
	if alive(p.PID()) {
		t.Fatal("node alive after Stop")
	}
	if err := p.Kill(); err != nil {
		t.Fatalf("kill of an exited node: %v", err)
	}
}

func TestFreePortsDistinct(t *testing.T) {
	ports, err := nodeproc.FreePorts("127.0.0.1", 20)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p <= 0 || seen[p] {
			t.Fatalf("ports %v: %d repeated or invalid", ports, p)
		}
		seen[p] = true
	}
}
