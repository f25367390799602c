package e2e_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestREADMEBuildLines checks the `go build` lines of README's three-node
// section: each names its binary under bin/ and builds a main package, and
// every bin/NAME the section runs afterwards is one of them and answers
// --version (the README once built bin/node and then ran bin/raftmq-node).
// The binaries themselves are the ones internal/nodeproc builds the same
// way, so the test does not link them again.
func TestREADMEBuildLines(t *testing.T) {
	bin := binaries(t)
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "## Three nodes on one machine")
	if !ok {
		t.Fatal("README has no three-node section")
	}
	_, block, _ := strings.Cut(section, "```\n")
	block, _, _ = strings.Cut(block, "```")
	built := map[string]string{} // binary name -> package
	for _, line := range strings.Split(block, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "go" || f[1] != "build" {
			continue
		}
		if len(f) < 5 || f[2] != "-o" || !strings.HasPrefix(f[3], "bin/") || len(f[3]) == len("bin/") {
			t.Fatalf("README build line %q does not say its binary's name (go build -o bin/NAME ./cmd/...)", line)
		}
		cmd := exec.Command("go", "list", "-f", "{{.Name}}", f[4])
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "main" {
			t.Fatalf("%s: %s is not a main package: %v %s", line, f[4], err, out)
		}
		built[strings.TrimPrefix(f[3], "bin/")] = f[4]
	}
	used := regexp.MustCompile(`(?m)(?:^|\s)bin/([\w-]+)\s`).FindAllStringSubmatch(block, -1)
	if len(built) < 2 || len(used) == 0 {
		t.Fatalf("README three-node block: %d build lines, %d binaries run:\n%s", len(built), len(used), block)
	}
	paths := map[string]string{"./cmd/node": bin.Node, "./cmd/raftmq": bin.CLI}
	for _, u := range used {
		pkg, ok := built[u[1]]
		if !ok {
			t.Fatalf("README runs bin/%s, which its build lines do not build (they build %v)", u[1], built)
		}
		path, ok := paths[pkg]
		if !ok || filepath.Base(path) != u[1] {
			t.Fatalf("README builds bin/%s from %s; internal/nodeproc builds %s from it", u[1], pkg, path)
		}
		if msg, err := exec.Command(path, "--version").CombinedOutput(); err != nil || !strings.HasPrefix(string(msg), u[1]+" ") {
			t.Fatalf("bin/%s --version: %v %s", u[1], err, msg)
		}
	}
}
