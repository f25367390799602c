package e2e_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestCleanStopLogsNoError: a three-node cluster that served writes and is
// stopped with SIGTERM, node by node, logs no ERROR line — an operator's
// alert on ERROR must not fire on a routine stop — and logs its recovery.
func TestCleanStopLogsNoError(t *testing.T) {
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cli(t, ctx, c, "topic", "create", "clean-stop", "--queues", "2")
	cli(t, ctx, c, "produce", "-t", "clean-stop", "-n", "500", "-s", "64")
	if err := c.Stop(ctx); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	for _, p := range c.Nodes {
		b, err := os.ReadFile(p.LogPath())
		if err != nil {
			t.Fatal(err)
		}
		log := string(b)
		if !strings.Contains(log, "recovered:") {
			t.Errorf("%s logged no recovery line", p.Spec().ID)
		}
		for _, line := range strings.Split(log, "\n") {
			if strings.Contains(line, "[ERROR]") {
				t.Errorf("%s logged an error on a clean run and stop: %s", p.Spec().ID, line)
			}
		}
	}
}
