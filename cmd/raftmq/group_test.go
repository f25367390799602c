package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/transport/transporttest"
)

// Bad usage of group and of consume --from-time exits 2 before anything
// is dialled, with a one-line reason naming what is wrong.
func TestGroupUsageErrors(t *testing.T) {
	dead := deadAddr(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"group"}, "missing subcommand"},
		{[]string{"group", "frobnicate"}, `unknown group command "frobnicate"`},
		{[]string{"group", "list", "extra"}, "usage: group list"},
		{[]string{"group", "describe"}, "usage: group describe G"},
		{[]string{"group", "describe", "g", "h"}, "usage: group describe G"},
		{[]string{"group", "reset", "g", "-t", "T"}, "give one of --to-time, --to-offset, --to-earliest, --to-latest"},
		{[]string{"group", "reset", "g", "-t", "T", "--to-earliest", "--to-latest"}, "--to-earliest and --to-latest exclude each other"},
		{[]string{"group", "reset", "g", "-t", "T", "--to-offset", "3", "--to-time", "2026-01-01T00:00:00Z"}, "--to-time and --to-offset exclude each other"},
		{[]string{"group", "reset", "g", "--to-earliest"}, "-t TOPIC is required"},
		{[]string{"group", "reset", "-t", "T", "--to-earliest"}, "usage: group reset G"},
		{[]string{"group", "reset", "g", "-t", "T", "--to-offset", "-1"}, "--to-offset -1 is negative"},
		{[]string{"group", "reset", "g", "-t", "T", "--to-offset", "x"}, "invalid argument"},
		{[]string{"group", "reset", "g", "-t", "T", "--to-time", "yesterday"}, `--to-time "yesterday": not an RFC3339 time`},
		{[]string{"group", "reset", "g", "-t", "T", "--to-time", "1969-12-31T23:59:59Z"}, "before 1970"},
		{[]string{"group", "reset", "g", "-t", "T", "--to-latest=false"}, "give --to-latest alone"},
		{[]string{"consume", "-t", "T", "--from-time", "noon"}, `--from-time "noon": not an RFC3339 time`},
		{[]string{"consume", "-t", "T", "--from-time", "2026-01-01T00:00:00Z", "--from", "3"}, "--from-time excludes --from and --group"},
		{[]string{"consume", "-t", "T", "--from-time", "2026-01-01T00:00:00Z", "--group", "g"}, "--from-time excludes --from and --group"},
	} {
		code, _, stderr := runCLI(t, append([]string{"--server", dead}, tc.args...)...)
		first, _, _ := strings.Cut(stderr, "\n")
		if code != exitUsage || !strings.Contains(first, tc.want) || strings.Contains(stderr, "connection refused") {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and %q on the first line", tc.args, code, stderr, exitUsage, tc.want)
		}
	}
	for _, args := range [][]string{{"group", "--help"}, {"help", "group"}, {"group", "reset", "--help"}, {"group", "describe", "-h"}, {"group", "list", "--help"}} {
		code, stdout, stderr := runCLI(t, args...)
		if code != exitOK || !strings.Contains(stdout, "Usage:") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
}

// group list, describe and reset in text and JSON against a real server;
// failures (an unknown group or topic) exit 1.
func TestGroupSession(t *testing.T) {
	s := transporttest.StartT(t)
	srv := "--server=" + s.Addr
	mustRun(t, srv, "topic", "create", "T", "--queues", "2")
	mustRun(t, srv, "produce", "-t", "T", "-n", "10", "-s", "10", "--quiet")
	mustRun(t, srv, "consume", "-t", "T", "-q", "0", "--group", "g", "-n", "2", "--quiet")

	out := mustRun(t, srv, "group", "list")
	if !strings.Contains(out, "GROUP") || !strings.Contains(out, "g ") || !strings.Contains(out, " 8\n") {
		t.Fatalf("group list: %q", out)
	}
	var list struct {
		Group  string   `json:"group"`
		Topics []string `json:"topics"`
		Lag    int64    `json:"lag"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, srv, "group", "list", "--json")), &list); err != nil || list.Group != "g" || list.Lag != 8 || len(list.Topics) != 1 {
		t.Fatalf("group list --json: %v %+v", err, list)
	}

	out = mustRun(t, srv, "group", "describe", "g")
	for _, want := range []string{"TOPIC", "COMMITTED", "LAG", "\nT      0      2", "\nT      1      -", "total lag: 8", "members: none live"} {
		if !strings.Contains(out, want) {
			t.Fatalf("group describe: no %q in\n%s", want, out)
		}
	}
	var desc struct {
		Group  string           `json:"group"`
		Queues []groupQueueJSON `json:"queues"`
		Lag    int64            `json:"lag"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, srv, "group", "describe", "g", "-t", "T", "--json")), &desc); err != nil ||
		len(desc.Queues) != 2 || desc.Queues[0].Committed == nil || *desc.Queues[0].Committed != 2 ||
		desc.Queues[1].Committed != nil || desc.Queues[0].Lag != 3 || desc.Queues[1].Lag != 5 || desc.Lag != 8 {
		t.Fatalf("group describe --json: %v %+v", err, desc)
	}

	out = mustRun(t, srv, "group", "reset", "g", "-t", "T", "--to-latest")
	if !strings.Contains(out, "reset group g on topic T to latest") || !strings.Contains(out, "\n0      2         5") ||
		!strings.Contains(out, "\n1      -         5") {
		t.Fatalf("group reset: %q", out)
	}
	var reset struct {
		To     string `json:"to"`
		Queues []struct {
			QueueID  int32  `json:"queueId"`
			Previous *int64 `json:"previousOffset"`
			Offset   int64  `json:"offset"`
		} `json:"queues"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, srv, "group", "reset", "g", "-t", "T", "--to-offset", "1", "--json")), &reset); err != nil ||
		reset.To != "offset 1" || len(reset.Queues) != 2 || *reset.Queues[1].Previous != 5 || reset.Queues[1].Offset != 1 {
		t.Fatalf("group reset --json: %v %+v", err, reset)
	}
	if out := mustRun(t, srv, "consume", "-t", "T", "--group", "g", "--to-end", "--quiet"); strings.Count(out, "\n") != 8 {
		t.Fatalf("consume after a reset to offset 1: %d messages, want 8", strings.Count(out, "\n"))
	}

	for _, args := range [][]string{
		{"group", "describe", "nobody"},
		{"group", "describe", "g", "-t", "nosuch"},
		{"group", "reset", "g", "-t", "nosuch", "--to-earliest"},
	} {
		code, _, stderr := runCLI(t, append([]string{srv}, args...)...)
		if code != exitFail || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%q: exit %d stderr %q, want 1 and one line", args, code, stderr)
		}
	}
}
