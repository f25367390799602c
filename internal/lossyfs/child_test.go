package lossyfs

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Whatever maps files of the mount runs in a child process (the test
// binary again, LOSSYFS_CHILD=mode): a page fault on the mount waits for
// this process's FUSE server, and a fault cannot be preempted, so a garbage
// collection stopping the world while one waits would deadlock. It is also
// the real shape: the process using the mount is SIGKILLed before the power
// goes.

func TestMain(m *testing.M) {
	mode := os.Getenv("LOSSYFS_CHILD")
	if mode == "" {
		os.Exit(m.Run())
	}
	var err error
	switch mode {
	case "mmap":
		err = childMmap(os.Getenv("LOSSYFS_FILE"))
	case "store-write":
		err = childStoreWrite(os.Getenv("LOSSYFS_DIR"))
	case "store-install":
		err = childStoreInstall(os.Getenv("LOSSYFS_DIR"))
	case "store-verify":
		err = childStoreVerify(os.Getenv("LOSSYFS_DIR"))
	default:
		err = fmt.Errorf("unknown child mode %q", mode)
	}
	if err != nil {
		fmt.Printf("ERROR %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// child is a running child process and its output lines.
type child struct {
	t     testing.TB
	cmd   *exec.Cmd
	lines chan string
	done  chan error
}

func startChild(t testing.TB, mode string, env ...string) *child {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{"LOSSYFS_CHILD=" + mode}, env...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	c := &child{t: t, cmd: cmd, lines: make(chan string, 100), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
		c.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		for range c.lines {
		}
	})
	return c
}

// expect returns the child's next line, which must start with prefix.
func (c *child) expect(prefix string) string {
	c.t.Helper()
	line, ok := <-c.lines
	if !ok {
		c.t.Fatalf("child exited (%v) while %q was expected", <-c.done, prefix)
	}
	if !strings.HasPrefix(line, prefix) {
		c.t.Fatalf("child said %q, want %q...", line, prefix)
	}
	return strings.TrimSpace(strings.TrimPrefix(line, prefix))
}

// kill SIGKILLs the child and waits for it.
func (c *child) kill() {
	c.t.Helper()
	must(c.t, c.cmd.Process.Signal(syscall.SIGKILL))
	for range c.lines {
	}
	if err := <-c.done; err == nil {
		c.t.Fatalf("child exited cleanly before SIGKILL")
	}
}

// wait waits for a child that exits by itself; it must succeed.
func (c *child) wait() {
	c.t.Helper()
	for line := range c.lines {
		c.t.Logf("child: %s", line)
	}
	if err := <-c.done; err != nil {
		c.t.Fatalf("child: %v", err)
	}
}

// block waits to be killed.
func block() {
	select {}
}
