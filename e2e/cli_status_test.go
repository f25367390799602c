package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestClusterStatusWithoutLeader: `raftmq cluster status` is the compose
// healthcheck, so it exits 0 while the cluster has a leader and 1 once it
// has none (two of three nodes stopped), in text and with --json.
func TestClusterStatusWithoutLeader(t *testing.T) {
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if out := cli(t, ctx, c, "cluster", "status"); !strings.HasPrefix(out, "leader ") {
		t.Fatalf("status with a leader: %q", out)
	}
	lead, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Stop the leader and one follower: the survivor can elect no one.
	survivor := (lead + 1) % 3
	for _, i := range []int{lead, (lead + 2) % 3} {
		if code, err := c.Nodes[i].Stop(ctx); err != nil || code != 0 {
			t.Fatalf("stop %s: exit %d, %v", c.Nodes[i].Spec().ID, code, err)
		}
	}
	t.Logf("stopped two nodes")
	one := []string{c.Nodes[survivor].Spec().APIAddr}
	var r cliResult
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	err = pollUntil(wctx, func() error {
		r = runCLI(t, wctx, c.Bin, one, "cluster", "status")
		if r.code == 0 {
			return fmt.Errorf("exit 0: %s", r.stdout)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("status kept reporting a leader: %v", err)
	}
	t.Logf("no leader reported")
	if r.code != 1 || !strings.HasPrefix(r.stdout, "no leader") || !strings.Contains(r.stderr, "no leader") {
		t.Fatalf("status without a leader: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, ctx, c.Bin, one, "--json", "cluster", "status")
	var st struct {
		HasLeader bool
		LeaderID  string
		Members   []struct{ ID, State string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || r.code != 1 || st.HasLeader || st.LeaderID != "" || len(st.Members) != 3 {
		t.Fatalf("--json status without a leader: exit %d %q (%v)", r.code, r.stdout, err)
	}
}
