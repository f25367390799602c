package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/nodeproc"
)

// binaries builds raftmq-node and raftmq once per test binary.
func binaries(t testing.TB) nodeproc.Binaries {
	t.Helper()
	if testing.Short() {
		t.Skip("e2e: starts real node processes (skipped with -short)")
	}
	bin, err := nodeproc.Build()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// startCluster starts an n-node loopback cluster with small store files
// that the test's cleanup stops (SIGTERM, then SIGKILL); data dirs and logs
// are kept on failure.
func startCluster(t testing.TB, n int, tune ...func(*nodeproc.ClusterOptions)) *nodeproc.Cluster {
	t.Helper()
	bin := binaries(t)
	dir := nodeproc.TempDir(t, "e2e-"+strings.ReplaceAll(t.Name(), "/", "_"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args, err := nodeproc.SmallStoreArgs(dir)
	if err != nil {
		t.Fatal(err)
	}
	opts := nodeproc.ClusterOptions{N: n, Dir: dir, Args: args}
	for _, f := range tune {
		f(&opts)
	}
	c, err := nodeproc.StartCluster(ctx, bin, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.Stop(ctx); err != nil {
			t.Errorf("cluster stop: %v", err)
		}
	})
	return c
}

// newClient connects a Go client to all nodes of c.
func newClient(t testing.TB, ctx context.Context, c *nodeproc.Cluster, opts client.Options) *client.Client {
	t.Helper()
	cl, err := client.New(ctx, c.APIAddrs(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// cliResult is one run of the raftmq CLI.
type cliResult struct {
	stdout, stderr string
	code           int
}

// runCLI runs the raftmq binary with args (servers, if not empty, as
// --server) and returns its streams and exit code.
func runCLI(t *testing.T, ctx context.Context, bin nodeproc.Binaries, servers []string, args ...string) cliResult {
	t.Helper()
	if len(servers) > 0 {
		args = append([]string{"--server", strings.Join(servers, ",")}, args...)
	}
	cmd := exec.CommandContext(ctx, bin.CLI, args...)
	cmd.WaitDelay = 5 * time.Second
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	res := cliResult{stdout: out.String(), stderr: errOut.String()}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		res.code = exit.ExitCode()
	default:
		t.Fatalf("raftmq %s: %v", strings.Join(args, " "), err)
	}
	return res
}

// cli runs the CLI against c and fails the test unless it exits 0.
func cli(t *testing.T, ctx context.Context, c *nodeproc.Cluster, args ...string) string {
	t.Helper()
	r := runCLI(t, ctx, c.Bin, c.APIAddrs(), append(append([]string{}, c.CLIArgs...), args...)...)
	if r.code != 0 {
		t.Fatalf("raftmq %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// jsonLines decodes one JSON object per non-empty line into T values.
func jsonLines[T any](t *testing.T, out string) []T {
	t.Helper()
	var vs []T
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var v T
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("not a JSON line: %q: %v", line, err)
		}
		vs = append(vs, v)
	}
	return vs
}

// consumedMessage is the part of `consume --json` the tests check.
type consumedMessage struct {
	MsgID          string            `json:"msgId"`
	Topic          string            `json:"topic"`
	QueueID        int32             `json:"queueId"`
	QueueOffset    int64             `json:"queueOffset"`
	PhysicalOffset int64             `json:"physicalOffset"`
	StoreTimestamp int64             `json:"storeTimestamp"`
	BornTimestamp  int64             `json:"bornTimestamp"`
	Tags           string            `json:"tags"`
	Keys           []string          `json:"keys"`
	Properties     map[string]string `json:"properties"`
	Body           string            `json:"body"`
	BodyEncoding   string            `json:"bodyEncoding"`
}

// ack is one line of a --ack-log file.
type ack struct {
	msgID, topic, queue, offset string
}

func (a ack) unknown() bool { return a.queue == "?" }

// readAckLog parses "msgId topic queueId queueOffset" lines.
func readAckLog(t *testing.T, data string) []ack {
	t.Helper()
	var acks []ack
	for _, line := range strings.Split(strings.TrimSpace(data), "\n") {
		if line == "" {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			t.Fatalf("ack log line %q: want 4 tab-separated fields", line)
		}
		acks = append(acks, ack{f[0], f[1], f[2], f[3]})
	}
	return acks
}

// pollUntil calls cond every 50ms until it returns nil or ctx ends; the
// error names the last reason.
func pollUntil(ctx context.Context, cond func() error) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		err := cond()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-t.C:
		}
	}
}
