package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/raftmq/raftmq/internal/nodeproc"
)

// stuckReport fetches every running node's goroutines (pprof, debug=2) and
// returns the blocked ones that are raftmq's or Raft's, one line per
// distinct stack with its count: what a stalled round leaves for the log
// of a run that cannot be inspected afterwards (CI).
func stuckReport(ctx context.Context, cl *nodeproc.Cluster) string {
	var b strings.Builder
	for _, p := range cl.Nodes {
		if !p.Running() {
			fmt.Fprintf(&b, "node %s: not running\n", p.Spec().ID)
			continue
		}
		gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		dump, err := p.Get(gctx, "/debug/pprof/goroutine?debug=2")
		cancel()
		if err != nil {
			fmt.Fprintf(&b, "node %s: no goroutine dump: %v\n", p.Spec().ID, err)
			continue
		}
		fmt.Fprintf(&b, "node %s: blocked goroutines:\n%s", p.Spec().ID, blockedStacks(string(dump), 40))
	}
	return b.String()
}

// blockedStacks summarizes a goroutine dump (pprof debug=2, or what a Go
// program prints on SIGQUIT): goroutines in a blocking state whose stack
// holds a raftmq, hashicorp/raft or main package frame (a goroutine that
// spins shows as running),
// grouped by their function names (file lines dropped), the largest groups
// first, at most max groups.
func blockedStacks(dump string, max int) string {
	type group struct {
		key   string
		state string
		count int
	}
	groups := map[string]*group{}
	for _, g := range strings.Split(dump, "\n\n") {
		lines := strings.Split(strings.TrimSpace(g), "\n")
		for len(lines) > 0 && !strings.HasPrefix(lines[0], "goroutine ") {
			lines = lines[1:] // what precedes the first goroutine (SIGQUIT's header)
		}
		if len(lines) < 2 {
			continue
		}
		state := lines[0][strings.IndexByte(lines[0], '[')+1:]
		state = strings.TrimSuffix(state, "]:")
		if strings.HasPrefix(state, "IO wait") || strings.HasPrefix(state, "syscall") || strings.Contains(g, "runtime/pprof.") {
			continue // network reads, and the goroutine writing the dump
		}
		var funcs []string
		ours := false
		for i := 1; i < len(lines); i += 2 { // function line, then its file line
			f := lines[i]
			if k := strings.LastIndexByte(f, '('); k > 0 {
				f = f[:k]
			}
			ours = ours || strings.Contains(f, "raftmq/") || strings.Contains(f, "hashicorp/raft") || strings.HasPrefix(f, "main.")
			funcs = append(funcs, f)
			if len(funcs) == 10 {
				break
			}
		}
		if !ours {
			continue
		}
		key := strings.Join(funcs, " < ")
		if groups[key] == nil {
			groups[key] = &group{key: key, state: state}
		}
		groups[key].count++
	}
	list := make([]*group, 0, len(groups))
	for _, g := range groups {
		list = append(list, g)
	}
	slices.SortFunc(list, func(a, b *group) int { return b.count - a.count })
	var b strings.Builder
	for i, g := range list {
		if i == max {
			fmt.Fprintf(&b, "  ... %d more\n", len(list)-max)
			break
		}
		fmt.Fprintf(&b, "  %d× [%s] %s\n", g.count, g.state, g.key)
	}
	return b.String()
}
