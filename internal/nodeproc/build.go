package nodeproc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Binaries are the paths of freshly built raftmq-node and raftmq executables.
type Binaries struct{ Node, CLI string }

// ErrNoModule is returned by Build when no go.mod is found above the
// working directory.
var ErrNoModule = errors.New("nodeproc: no go.mod above the working directory")

var (
	buildOnce sync.Once
	buildBin  Binaries
	buildErr  error
)

// binDirPrefix names the per-process build directories under os.TempDir;
// the suffix is the building process's PID so stale ones can be swept.
const binDirPrefix = "raftmq-nodeproc-bin-"

// Build builds ./cmd/node and ./cmd/raftmq once per process into a temp dir
// (CGO_ENABLED=0, -trimpath) and returns their paths. Directories left by
// earlier test processes that are no longer running are removed first.
func Build() (Binaries, error) {
	buildOnce.Do(func() { buildBin, buildErr = build() })
	return buildBin, buildErr
}

func build() (Binaries, error) {
	root, err := ModuleRoot()
	if err != nil {
		return Binaries{}, err
	}
	sweepStaleBinDirs()
	dir, err := os.MkdirTemp("", binDirPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return Binaries{}, fmt.Errorf("nodeproc: %w", err)
	}
	bin := Binaries{Node: filepath.Join(dir, "raftmq-node"), CLI: filepath.Join(dir, "raftmq")}
	for _, b := range []struct{ out, pkg string }{{bin.Node, "./cmd/node"}, {bin.CLI, "./cmd/raftmq"}} {
		cmd := exec.Command("go", "build", "-trimpath", "-o", b.out, b.pkg)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			_ = os.RemoveAll(dir)
			return Binaries{}, fmt.Errorf("nodeproc: go build %s: %w\n%s", b.pkg, err, out)
		}
	}
	return bin, nil
}

// ModuleRoot walks up from the working directory to the directory holding go.mod.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("nodeproc: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", ErrNoModule
		}
		dir = parent
	}
}

// sweepStaleBinDirs removes build directories whose creating process is gone.
func sweepStaleBinDirs() {
	entries, err := os.ReadDir(os.TempDir())
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), binDirPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid == os.Getpid() || processAlive(pid) {
			continue
		}
		_ = os.RemoveAll(filepath.Join(os.TempDir(), e.Name()))
	}
}

// processAlive reports whether a process with this PID exists (signal 0).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
