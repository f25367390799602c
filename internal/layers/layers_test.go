package layers_test

import (
	"go/build"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/raftmq/raftmq/"

// layer of every package, by import path below the module; a package may
// import only packages of a lower layer. A new package must be placed here.
var layer = map[string]int{
	"vfs": 0, "proto/raftmq/v1": 0, "message": 0, "internal/buildinfo": 0, "internal/testseed": 0,
	"internal/testenv": 0, "internal/freeport": 0, "internal/layers": 0, "internal/entrycodec": 0, "internal/openloop": 0, "remoting": 0, "membership": 0,
	"tlsconf": 0, "auth": 0, "quota": 0,
	"mmap": 1, "wire": 1, "meta": 1, "internal/lossyfs": 1, "transport/transporttest/badinput": 1,
	"commitlog":    2,
	"consumequeue": 3, "index": 3,
	"recovery": 4,
	"store":    5, "verify": 5,
	"fsm":            6,
	"node/snapstore": 7,
	"transport":      8, "broker": 8, "dashboard": 8,
	"node": 9, "client": 9, "transport/transporttest": 9,
	"internal/nodeproc": 10, "bench/ceiling": 10,
	"bench": 11, "cmd/node": 11, "cmd/raftmq": 11, "cmd/lossyfs": 11,
	"cluster-tests": 12, "e2e": 12,
}

// TestImportsPointDown checks every package's non-test imports against the
// layering.
func TestImportsPointDown(t *testing.T) {
	imports := moduleImports(t)
	if len(imports) < len(layer)/2 {
		t.Fatalf("found only %d packages: is the module root right?", len(imports))
	}
	if bad := violations(imports); len(bad) > 0 {
		t.Fatalf("the import graph breaks the layering:\n%s", strings.Join(bad, "\n"))
	}
}

// The check catches what it is for: an upward import, a sideways one, an
// unplaced package, and a placed one that is gone.
func TestViolationsAreFound(t *testing.T) {
	imports := map[string][]string{}
	for pkg := range layer {
		imports[pkg] = nil
	}
	imports["store"] = []string{"commitlog", "node"} // up
	imports["client"] = []string{"node"}             // sideways
	imports["newpkg"] = nil                          // not placed
	delete(imports, "index")                         // gone
	got := strings.Join(violations(imports), "\n")
	for _, want := range []string{"store imports node", "client imports node", "newpkg: not placed", "index: placed"} {
		if !strings.Contains(got, want) {
			t.Errorf("violations miss %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "commitlog") {
		t.Errorf("a downward import was reported:\n%s", got)
	}
}

// violations lists, sorted, every way imports breaks the layering.
func violations(imports map[string][]string) []string {
	var bad []string
	for pkg, deps := range imports {
		l, ok := layer[pkg]
		if !ok {
			bad = append(bad, pkg+": not placed in the layering (add it to layer in internal/layers)")
			continue
		}
		for _, dep := range deps {
			dl, ok := layer[dep]
			switch {
			case !ok:
				bad = append(bad, pkg+" imports "+dep+", which is not placed in the layering")
			case dl >= l:
				bad = append(bad, pkg+" imports "+dep+": not a lower layer")
			}
		}
	}
	for pkg := range layer {
		if _, ok := imports[pkg]; !ok {
			bad = append(bad, pkg+": placed in the layering but not found (moved? remove it)")
		}
	}
	sort.Strings(bad)
	return bad
}

// moduleImports maps every package of the module (path below the module) to
// the module packages its non-test files import.
func moduleImports(t *testing.T) map[string][]string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root %s: %v", root, err)
	}
	out := map[string][]string{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "docs") {
			return filepath.SkipDir
		}
		if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != root {
			return filepath.SkipDir // a module of its own (third_party forks)
		}
		p, err := build.Default.ImportDir(path, 0)
		if err != nil {
			if _, ok := err.(*build.NoGoError); ok {
				return nil
			}
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		deps := []string{}
		for _, imp := range p.Imports {
			if dep, ok := strings.CutPrefix(imp, module); ok {
				deps = append(deps, dep)
			}
		}
		out[filepath.ToSlash(rel)] = deps
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// clientMustNotLink are the packages an application linking the Go client
// must not get: the storage engine and Raft.
var clientMustNotLink = []string{
	module + "store", module + "recovery", module + "commitlog", module + "consumequeue",
	module + "index", module + "mmap", module + "vfs", module + "fsm", module + "node",
	module + "transport", "github.com/hashicorp/raft", "github.com/hashicorp/raft-boltdb/v2", "github.com/hashicorp/raft-wal",
}

// TestClientStandsAlone: `go list -deps ./client` (everything an application
// that imports the client links) holds none of clientMustNotLink.
func TestClientStandsAlone(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "./client")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./client: %v", err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, module+"client") || !slices.Contains(deps, module+"message") {
		t.Fatalf("go list -deps ./client does not list the client and message: %v", deps)
	}
	for _, dep := range deps {
		for _, bad := range clientMustNotLink {
			if dep == bad || strings.HasPrefix(dep, bad+"/") {
				t.Errorf("the client links %s", dep)
			}
		}
	}
}
