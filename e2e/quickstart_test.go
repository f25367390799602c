package e2e_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/nodeproc"
	"github.com/raftmq/raftmq/recovery"
)

// defaultAddrs are raftmq-node's default raft, API, HTTP, RocketMQ broker
// and name-server addresses.
var defaultAddrs = []string{"127.0.0.1:7001", "127.0.0.1:9001", "127.0.0.1:8001", "127.0.0.1:10911", "127.0.0.1:9876"}

// portsFree reports which default address is taken, or "".
func portsFree() string {
	for _, a := range defaultAddrs {
		l, err := net.Listen("tcp", a)
		if err != nil {
			return a
		}
		_ = l.Close()
	}
	return ""
}

// TestQuickStart is README's quick start: raftmq-node with no flags in an
// empty working directory (single-node cluster in ./data on the default
// ports), then `raftmq produce -t demo -n 1000` and `raftmq consume -t demo
// -n 1000` with no --server; SIGTERM exits 0 and removes the abort file.
func TestQuickStart(t *testing.T) {
	bin := binaries(t)
	if taken := portsFree(); taken != "" {
		t.Skipf("quick start needs the default ports %v; %s is taken", defaultAddrs, taken)
	}
	wd := nodeproc.TempDir(t, "e2e-quickstart")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p, err := nodeproc.Start(bin, nodeproc.Spec{ID: "n1", Bare: true, WorkDir: wd,
		RaftAddr: defaultAddrs[0], APIAddr: defaultAddrs[1], HTTPAddr: defaultAddrs[2],
		RemotingAddr: defaultAddrs[3], NamesrvAddr: defaultAddrs[4],
		LogPath: filepath.Join(wd, "node.log")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill() })
	if err := p.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	abort := filepath.Join(wd, "data", "store", recovery.AbortName)
	if _, err := os.Stat(abort); err != nil {
		t.Fatalf("running node has no abort file at %s: %v", abort, err)
	}

	r := runCLI(t, ctx, bin, nil, "produce", "-t", "demo", "-n", "1000")
	if r.code != 0 || !strings.Contains(r.stdout, "produced 1000 messages") {
		t.Fatalf("raftmq produce -t demo -n 1000: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, ctx, bin, nil, "consume", "-t", "demo", "-n", "1000")
	if lines := strings.Count(r.stdout, "\n"); r.code != 0 || lines != 1000 {
		t.Fatalf("raftmq consume -t demo -n 1000: exit %d, %d lines\n%.500s%s", r.code, lines, r.stdout, r.stderr)
	}
	for _, line := range strings.SplitN(r.stdout, "\n", 3)[:2] {
		if !strings.HasPrefix(line, "demo\t") {
			t.Fatalf("consume line %q does not start with the topic", line)
		}
	}

	code, err := p.Stop(ctx)
	if err != nil || code != 0 {
		t.Fatalf("SIGTERM: exit code %d, %v; log ends:\n%s", code, err, p.LogTail(20))
	}
	if _, err := os.Stat(abort); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("abort file after SIGTERM: %v", err)
	}
}
