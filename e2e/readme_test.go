package e2e_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestREADMEBuildLines runs the `go build` lines of README's three-node
// section (into a temp dir instead of bin/) and checks that every bin/NAME
// the section runs afterwards was built and answers --version: the README
// once built bin/node and then ran bin/raftmq-node.
func TestREADMEBuildLines(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: builds binaries (skipped with -short)")
	}
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
	out := t.TempDir()
	built := 0
	for _, line := range strings.Split(block, "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || f[0] != "go" || f[1] != "build" || f[2] != "-o" {
			continue
		}
		if !strings.HasPrefix(f[3], "bin/") {
			t.Fatalf("README build line %q does not name its binary under bin/", line)
		}
		cmd := exec.Command("go", "build", "-o", filepath.Join(out, strings.TrimPrefix(f[3], "bin/")), f[4])
		cmd.Dir = ".."
		if msg, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", line, err, msg)
		}
		built++
	}
	used := regexp.MustCompile(`(?m)(?:^|\s)bin/([\w-]+)\s`).FindAllStringSubmatch(block, -1)
	if built < 2 || len(used) == 0 {
		t.Fatalf("README three-node block: %d build lines, %d binaries run:\n%s", built, len(used), block)
	}
	for _, u := range used {
		bin := filepath.Join(out, u[1])
		if msg, err := exec.Command(bin, "--version").CombinedOutput(); err != nil || !strings.Contains(string(msg), "commit") {
			t.Fatalf("README runs bin/%s, which its build lines do not build or which has no --version: %v %s", u[1], err, msg)
		}
	}
}
