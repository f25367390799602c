// Package buildinfo says which build of raftmq is running, for --version.
package buildinfo

import (
	"fmt"
	"runtime/debug"
)

// Commit may be set at build time when the build has no VCS stamp
// (GOFLAGS=-buildvcs=false, a docker build context without .git):
//
//	go build -ldflags "-X github.com/raftmq/raftmq/internal/buildinfo.Commit=$(git rev-parse --short HEAD)"
var Commit string

// String is "NAME VERSION (commit C[, modified], GOVERSION)": the module
// version ("(devel)" for a work tree build) and the commit.
func String(name string) string {
	version, commit, modified, goVersion := "(devel)", Commit, false, ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		if v := bi.Main.Version; v != "" {
			version = v
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if commit == "" {
					commit = s.Value
				}
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if len(commit) > 12 {
		commit = commit[:12]
	}
	if commit == "" {
		commit = "unknown"
	}
	if modified {
		commit += ", modified"
	}
	return fmt.Sprintf("%s %s (commit %s, %s)", name, version, commit, goVersion)
}
