package node

import (
	"context"
	"testing"
	"time"
)

// TestSoleVoterElectsAtOnce: a single-node cluster elects itself at its
// first start and again after a restart without waiting out its heartbeat
// timeout (10 s here: ready within 8 s is only possible without the wait),
// and leads with the configured timeout restored.
func TestSoleVoterElectsAtOnce(t *testing.T) {
	const heartbeat = 10 * time.Second
	cfg := testConfig(t, "n1")
	cfg.Raft.HeartbeatTimeout, cfg.Raft.ElectionTimeout = heartbeat, heartbeat
	for start := range 2 {
		n, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err = n.waitReady(ctx)
			cancel()
			if err == nil {
				break
			}
			if time.Since(began) > heartbeat*8/10 {
				_ = n.Close()
				t.Fatalf("start %d: not ready %v after start (a heartbeat timeout is %v): %v", start, time.Since(began), heartbeat, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if got := n.raft.ReloadableConfig().HeartbeatTimeout; got != heartbeat {
			_ = n.Close()
			t.Fatalf("start %d: leading with heartbeat timeout %v, want the configured %v back", start, got, heartbeat)
		}
		t.Logf("start %d: ready %v after New returned", start, time.Since(began))
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
