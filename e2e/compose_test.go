package e2e_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/nodeproc"
	"github.com/raftmq/raftmq/internal/testenv"
)

// dockerUnavailable returns why docker-compose cannot be used here, or "".
func dockerUnavailable(ctx context.Context) string {
	for _, bin := range []string{"docker", "docker-compose"} {
		if _, err := exec.LookPath(bin); err != nil {
			return bin + " is not installed"
		}
	}
	ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ictx, "docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		return fmt.Sprintf("no docker daemon reachable (docker info: %v: %s)", err, strings.TrimSpace(string(out)))
	}
	return ""
}

// run runs a command in dir and returns its combined output, failing the
// test on a non-zero exit.
func run(t *testing.T, ctx context.Context, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env, cmd.WaitDelay = dir, append(os.Environ(), env...), 5*time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestCompose builds the FROM-scratch image with scripts/docker-build.sh,
// brings docker-compose.yml's three nodes up (API ports published on
// 127.0.0.1), waits for the healthchecks, produces and consumes through the
// published ports with the CLI, and tears everything down including the
// volumes. Without a reachable docker daemon it skips loudly, and fails under CI=true.
func TestCompose(t *testing.T) {
	bin := binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 110*time.Second)
	defer cancel()
	testenv.Require(t, dockerUnavailable(ctx))
	root, err := nodeproc.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	removeStaleProjects(t, ctx, root)
	project := composePrefix + strconv.Itoa(os.Getpid())
	tag := "raftmq:" + project
	testTag := tag + "-small"
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		_ = exec.CommandContext(cctx, "docker", "rmi", "-f", testTag, tag).Run()
	})
	run(t, ctx, root, nil, "sh", "scripts/docker-build.sh", tag)

	// The test image adds the small-store config (the defaults preallocate
	// GiBs per node) on top of the real image; nothing is pulled.
	ctxDir := t.TempDir()
	dockerfile := fmt.Sprintf("FROM %s\nCOPY small.toml /small.toml\nENV RAFTMQ_CONFIG=/small.toml\n", tag)
	for name, data := range map[string]string{"Dockerfile": dockerfile, "small.toml": nodeproc.SmallStoreTOML} {
		if err := os.WriteFile(filepath.Join(ctxDir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run(t, ctx, ctxDir, nil, "docker", "build", "-q", "-t", testTag, ".")

	ports, err := nodeproc.FreePorts("127.0.0.1", 3)
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"RAFTMQ_IMAGE=" + testTag}
	servers := make([]string, 3)
	for i, p := range ports {
		env = append(env, fmt.Sprintf("RAFTMQ_API_PORT_N%d=%d", i+1, p))
		servers[i] = fmt.Sprintf("127.0.0.1:%d", p)
	}
	compose := func(args ...string) string {
		return run(t, ctx, root, env, "docker-compose", append([]string{"-p", project, "-f", "docker-compose.yml"}, args...)...)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if t.Failed() {
			logs, _ := exec.CommandContext(cctx, "docker-compose", "-p", project, "-f", filepath.Join(root, "docker-compose.yml"), "logs", "--tail", "30").CombinedOutput()
			t.Logf("compose logs:\n%s", logs)
		}
		cmd := exec.CommandContext(cctx, "docker-compose", "-p", project, "-f", "docker-compose.yml", "down", "-v", "--remove-orphans", "-t", "10")
		cmd.Dir, cmd.Env = root, append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("docker-compose down: %v\n%s", err, out)
		}
		vols, _ := exec.CommandContext(cctx, "docker", "volume", "ls", "-q", "--filter", "name="+project).Output()
		if len(strings.TrimSpace(string(vols))) > 0 {
			t.Errorf("volumes left after down -v: %s", vols)
		}
	})
	compose("up", "-d")

	waitHealthy(t, ctx, compose)
	st := jsonLines[statusOut](t, cliOK(t, ctx, bin, servers, "cluster", "status", "--json"))
	if len(st) != 1 || st[0].LeaderID == "" || len(st[0].Members) != 3 {
		t.Fatalf("compose cluster status: %+v", st)
	}

	ackPath := filepath.Join(t.TempDir(), "acks.tsv")
	cliOK(t, ctx, bin, servers, "produce", "-t", "demo", "-n", "500", "-s", "128", "--ack-log", ackPath)
	ackData, err := os.ReadFile(ackPath)
	if err != nil {
		t.Fatal(err)
	}
	acks := readAckLog(t, string(ackData))
	msgs := jsonLines[consumedMessage](t, cliOK(t, ctx, bin, servers, "consume", "-t", "demo", "--to-end", "--json"))
	if len(acks) != 500 {
		t.Fatalf("%d acknowledgements, want 500", len(acks))
	}
	checkConsumedOnce(t, msgs, acks, "demo", 128)
}

// composePrefix starts the compose project (and image tag) names of
// TestCompose; the suffix is the PID of the test process.
const composePrefix = "raftmqe2e"

// removeStaleProjects takes down compose projects and images left by an
// earlier TestCompose whose process died before its cleanup (a go test
// timeout): their containers would otherwise restart forever.
func removeStaleProjects(t *testing.T, ctx context.Context, root string) {
	t.Helper()
	out, err := exec.CommandContext(ctx, "docker", "ps", "-a", "--filter", "label=com.docker.compose.project",
		"--format", `{{.Label "com.docker.compose.project"}}`).Output()
	if err != nil {
		return
	}
	seen := map[string]bool{}
	for _, name := range strings.Fields(string(out)) {
		pid, err := strconv.Atoi(strings.TrimPrefix(name, composePrefix))
		if seen[name] || !strings.HasPrefix(name, composePrefix) || err != nil || syscall.Kill(pid, 0) == nil {
			continue
		}
		seen[name] = true
		t.Logf("removing compose project %s left by dead test process %d", name, pid)
		cmd := exec.CommandContext(ctx, "docker-compose", "-p", name, "-f", "docker-compose.yml", "down", "-v", "--remove-orphans", "-t", "5")
		cmd.Dir = root
		_ = cmd.Run()
		_ = exec.CommandContext(ctx, "docker", "rmi", "-f", "raftmq:"+name+"-small", "raftmq:"+name).Run()
	}
}

// cliOK runs the CLI against servers and fails unless it exits 0.
func cliOK(t *testing.T, ctx context.Context, bin nodeproc.Binaries, servers []string, args ...string) string {
	t.Helper()
	r := runCLI(t, ctx, bin, servers, args...)
	if r.code != 0 {
		t.Fatalf("raftmq %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// waitHealthy polls `docker-compose ps` until all three services report
// healthy (their healthcheck runs the raftmq CLI inside the container).
func waitHealthy(t *testing.T, ctx context.Context, compose func(...string) string) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	tick := time.NewTicker(time.Second) // each docker-compose run costs ~0.5 s of CPU
	defer tick.Stop()
	for {
		out := compose("ps")
		if strings.Count(out, "(healthy)") == 3 {
			return
		}
		select {
		case <-wctx.Done():
			t.Fatalf("compose services not all healthy: %v\n%s", wctx.Err(), out)
		case <-tick.C:
		}
	}
}
