package main

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/raftmq/raftmq/internal/nodeproc"
)

// stuckReport fetches every running node's goroutine profile (pprof,
// debug=1: goroutines grouped by stack, largest groups first) and returns
// its largest groups: what a stalled round leaves for the log of a run that
// cannot be inspected afterwards (CI).
func stuckReport(ctx context.Context, cl *nodeproc.Cluster) string {
	var b strings.Builder
	for _, p := range cl.Nodes {
		if !p.Running() {
			fmt.Fprintf(&b, "node %s: not running\n", p.Spec().ID)
			continue
		}
		gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		profile, err := p.Get(gctx, "/debug/pprof/goroutine?debug=1")
		cancel()
		if err != nil {
			fmt.Fprintf(&b, "node %s: no goroutine profile: %v\n", p.Spec().ID, err)
			continue
		}
		fmt.Fprintf(&b, "node %s: %s", p.Spec().ID, profileGroups(string(profile), 25))
	}
	return b.String()
}

// profileGroups summarizes a debug=1 goroutine profile: its total, then
// the max largest groups of identical stacks, each as its count and the
// function names of its frames (innermost first).
func profileGroups(profile string, max int) string {
	blocks := strings.Split(strings.TrimSpace(profile), "\n\n")
	var b strings.Builder
	if len(blocks) > 0 {
		head, _, _ := strings.Cut(blocks[0], "\n")
		fmt.Fprintf(&b, "%s\n", head) // "goroutine profile: total N"
	}
	shown := 0
	for _, blk := range blocks {
		lines := strings.Split(blk, "\n")
		for len(lines) > 0 && !strings.Contains(lines[0], " @ 0x") {
			lines = lines[1:]
		}
		if len(lines) < 2 {
			continue
		}
		count, _, _ := strings.Cut(lines[0], " @ ")
		if _, err := strconv.Atoi(count); err != nil {
			continue
		}
		if shown == max {
			b.WriteString("  ...\n")
			break
		}
		var funcs []string
		for _, l := range lines[1:] {
			fields := strings.Fields(l) // "#", pc, func+off, file:line
			if len(fields) < 3 || fields[0] != "#" {
				continue
			}
			f, _, _ := strings.Cut(fields[2], "+0x")
			funcs = append(funcs, f)
			if len(funcs) == 12 {
				break
			}
		}
		fmt.Fprintf(&b, "  %s× %s\n", count, strings.Join(funcs, " < "))
		shown++
	}
	return b.String()
}

// blockedStacks summarizes a goroutine dump in the debug=2 form (what a
// Go program prints on SIGQUIT): every goroutine not waiting for network
// input or in a system call, grouped by its function names (file lines
// dropped), the largest groups first, at most max groups.
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
		if strings.HasPrefix(state, "IO wait") || strings.HasPrefix(state, "syscall") {
			continue
		}
		var funcs []string
		for i := 1; i < len(lines); i += 2 { // function line, then its file line
			f := lines[i]
			if k := strings.LastIndexByte(f, '('); k > 0 {
				f = f[:k]
			}
			funcs = append(funcs, f)
			if len(funcs) == 12 {
				break
			}
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

// tcpSockets lists the TCP sockets of process pid and the other ends of
// its connections, with their owners (ss -tanp), or why it cannot.
func tcpSockets(pid int) string {
	out, err := exec.Command("ss", "-tanp").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("  (ss: %v)\n", err)
	}
	lines := strings.Split(string(out), "\n")
	var mine []string // local addresses of pid's sockets
	for _, l := range lines {
		if f := strings.Fields(l); len(f) >= 5 && strings.Contains(l, fmt.Sprintf("pid=%d,", pid)) {
			mine = append(mine, f[3])
		}
	}
	var b strings.Builder
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) < 5 {
			continue
		}
		if slices.Contains(mine, f[3]) || slices.Contains(mine, f[4]) {
			fmt.Fprintf(&b, "  %s\n", strings.Join(f, " "))
		}
	}
	return b.String()
}

// nodeAddrs lists each node's API, Raft and HTTP addresses.
func nodeAddrs(cl *nodeproc.Cluster) []string {
	var out []string
	for _, p := range cl.Nodes {
		s := p.Spec()
		out = append(out, fmt.Sprintf("%s api %s raft %s http %s", s.ID, s.APIAddr, s.RaftAddr, s.HTTPAddr))
	}
	return out
}
