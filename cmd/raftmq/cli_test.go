package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/transport/transporttest"
)

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code = run(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

func deadAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := lis.Addr().String()
	_ = lis.Close()
	return a
}

// Bad usage exits 2 without contacting any server (--server points nowhere).
func TestUsageErrors(t *testing.T) {
	dead := deadAddr(t)
	cases := [][]string{
		{},
		{"nosuchcommand"},
		{"--nosuchflag", "topic", "list"},
		{"topic"},
		{"topic", "frobnicate"},
		{"topic", "create"},
		{"topic", "create", "T", "--queues", "0"},
		{"topic", "create", "T", "--queues", "x"},
		{"topic", "list", "extra"},
		{"topic", "describe"},
		{"produce"},
		{"produce", "-t", "T", "-n", "0"},
		{"produce", "-t", "T", "-s", "-1"},
		{"produce", "-t", "T", "--batch", "0"},
		{"produce", "-t", "T", "stray"},
		{"produce", "-t", "T", "--delay", "1s", "--deliver-at", "2030-01-01T00:00:00Z"},
		{"produce", "-t", "T", "--delay", "41d"},
		{"produce", "-t", "T", "--delay", "-1s"},
		{"produce", "-t", "T", "--delay", "1000h"},
		{"produce", "-t", "T", "--deliver-at", "tomorrow"},
		{"produce", "-t", "T", "--deliver-at", "2099-01-01T00:00:00Z"},
		{"consume"},
		{"consume", "-t", "T", "--from", "3", "--group", "g"},
		{"consume", "-t", "T", "-n", "-1"},
		{"query"},
		{"query", "--key", "k"},
		{"query", "--key", "k", "-t", "T", "--msg-id", "x"},
		{"cluster"},
		{"cluster", "join", "n4"},
		{"cluster", "remove"},
		{"cluster", "transfer", "a", "b"},
		{"cluster", "dance"},
		{"bench"},
		{"bench", "sing", "-t", "T"},
		{"bench", "produce"},
		{"bench", "produce", "-t", "T", "-n", "0"},
		{"bench", "e2e", "-t", "T", "-s", "4"},
		{"bench", "produce", "-t", "T", "-c", "0"},
		{"bench", "produce", "-t", "T", "--inflight", "0"},
		{"bench", "produce", "-t", "T", "-n", "10", "-s", "4194304", "--batch", "64"}, // 256 MiB per send
		{"verify"},
		{"--server", "", "topic", "list"},
	}
	for _, args := range cases {
		full := append([]string{"--server", dead}, args...)
		if len(args) > 0 && args[0] == "--server" {
			full = args
		}
		code, _, stderr := runCLI(t, full...)
		if code != exitUsage {
			t.Errorf("%q: exit %d, want %d (stderr %q)", args, code, exitUsage, stderr)
		}
		if stderr == "" {
			t.Errorf("%q: no message on stderr", args)
		}
	}
}

func TestUnreachableServerFails(t *testing.T) {
	code, _, stderr := runCLI(t, "--server", deadAddr(t), "topic", "list")
	if code != exitFail || !strings.Contains(stderr, "raftmq topic") {
		t.Fatalf("exit %d stderr %q", code, stderr)
	}
}

func TestHelpExitsZero(t *testing.T) {
	if code, _, _ := runCLI(t, "help"); code != exitOK {
		t.Fatalf("help: exit %d", code)
	}
	if code, _, _ := runCLI(t, "produce", "-h"); code != exitOK {
		t.Fatalf("produce -h: exit %d", code)
	}
}

// Help at every level goes to stdout and exits 0.
func TestHelpAtEveryLevel(t *testing.T) {
	for _, args := range [][]string{
		{"--help"}, {"-h"}, {"help"}, {"help", "topic"}, {"topic", "--help"}, {"topic", "create", "--help"},
		{"produce", "-h"}, {"consume", "--help"}, {"query", "--help"}, {"cluster", "--help"},
		{"cluster", "transfer", "--help"}, {"bench", "--help"}, {"bench", "produce", "--help"},
		{"verify", "--help"}, {"completion", "--help"},
	} {
		code, stdout, stderr := runCLI(t, args...)
		if code != exitOK || !strings.Contains(stdout, "Usage:") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
}

func TestVersionAndCompletion(t *testing.T) {
	code, stdout, _ := runCLI(t, "--version")
	if code != exitOK || !strings.HasPrefix(stdout, "raftmq ") || !strings.Contains(stdout, "commit") {
		t.Fatalf("--version: exit %d %q", code, stdout)
	}
	for _, sh := range []string{"bash", "zsh", "fish", "powershell"} {
		code, stdout, stderr := runCLI(t, "completion", sh)
		if code != exitOK || !strings.Contains(stdout, "raftmq") {
			t.Errorf("completion %s: exit %d, %d bytes, stderr %q", sh, code, len(stdout), stderr)
		}
	}
}

// Addresses are checked before anything is dialled: a missing port is bad
// usage (exit 2) naming the address, also when it comes from RAFTMQ_SERVER.
func TestServerValidation(t *testing.T) {
	for _, c := range []struct{ server, want string }{
		{"localhost", `"localhost": missing port`},
		{"127.0.0.1:9001,localhost", `"localhost": missing port`},
		{"localhost:http", `port "http"`},
		{"localhost:0", `port "0"`},
		{":9001", "missing host"},
		{"[::1", "not host:port"},
		{" , ", "--server is empty"},
	} {
		code, _, stderr := runCLI(t, "--server", c.server, "topic", "list")
		if code != exitUsage || !strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") != 2 {
			t.Errorf("--server %q: exit %d, stderr %q, want exit 2 and %q", c.server, code, stderr, c.want)
		}
	}
	t.Setenv("RAFTMQ_SERVER", "localhost")
	if code, _, stderr := runCLI(t, "topic", "list"); code != exitUsage || !strings.Contains(stderr, `"localhost": missing port`) {
		t.Fatalf("RAFTMQ_SERVER=localhost: exit %d, stderr %q", code, stderr)
	}
	// Help and completion never dial: a bad RAFTMQ_SERVER does not matter.
	for _, args := range [][]string{{"help"}, {"help", "topic"}, {"completion", "bash"}, {"topic", "--help"}} {
		if code, _, stderr := runCLI(t, args...); code != exitOK {
			t.Errorf("%q with RAFTMQ_SERVER=localhost: exit %d %q", args, code, stderr)
		}
	}
	// verify never dials: a bad --server does not matter to it (an empty
	// dir fails verification, exit 1, not bad usage).
	if code, _, stderr := runCLI(t, "verify", t.TempDir()); code != exitFail || strings.Contains(stderr, "--server") {
		t.Fatalf("verify with a bad RAFTMQ_SERVER: exit %d %q", code, stderr)
	}
}

// Shell completion offers the cluster's topic names for -t and for topic
// describe's argument.
func TestCompleteTopics(t *testing.T) {
	s := transporttest.StartT(t)
	srv := "--server=" + s.Addr
	mustRun(t, srv, "topic", "create", "orders", "--queues", "1")
	mustRun(t, srv, "topic", "create", "audit", "--queues", "1")
	for _, args := range [][]string{
		{srv, "__complete", "topic", "describe", "or"},
		{srv, "__complete", "produce", "-t", "or"},
		{srv, "__complete", "bench", "consume", "--topic", ""},
	} {
		out := mustRun(t, args...)
		if !strings.Contains(out, "orders\n") || (args[len(args)-1] == "or" && strings.Contains(out, "audit")) {
			t.Errorf("%q: %q", args, out)
		}
	}
	// Unreachable: no candidates, no error.
	if out := mustRun(t, "--server", deadAddr(t), "__complete", "topic", "describe", ""); strings.Contains(out, "orders") {
		t.Fatalf("completion without a cluster: %q", out)
	}
}

// RAFTMQ_SERVER is --server's default; the flag wins over it.
func TestServerFromEnv(t *testing.T) {
	s := transporttest.StartT(t)
	t.Setenv("RAFTMQ_SERVER", s.Addr)
	mustRun(t, "topic", "create", "E", "--queues", "1")
	t.Setenv("RAFTMQ_SERVER", deadAddr(t))
	if out := mustRun(t, "--server", s.Addr, "topic", "list"); !strings.Contains(out, "E\t1") {
		t.Fatalf("--server over RAFTMQ_SERVER: %q", out)
	}
}

// An operation's error is one line without the gRPC chain; --debug shows it.
func TestErrorOneLine(t *testing.T) {
	dead := deadAddr(t)
	code, _, stderr := runCLI(t, "--server", dead, "topic", "list")
	if code != exitFail || strings.Count(stderr, "\n") != 1 || strings.Contains(stderr, "rpc error") ||
		!strings.Contains(stderr, "connection refused") || !strings.HasPrefix(stderr, "raftmq topic list: ") {
		t.Fatalf("exit %d stderr %q", code, stderr)
	}
	code, _, stderr = runCLI(t, "--server", dead, "--debug", "topic", "list")
	if code != exitFail || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "rpc error: code = Unavailable") {
		t.Fatalf("--debug: exit %d stderr %q", code, stderr)
	}
}

// Without a terminal progress lines still go to stderr, plain (no carriage
// returns); --quiet turns them off.
func TestProgressWithoutTerminal(t *testing.T) {
	var buf syncBuffer
	e := &env{stderr: &buf}
	p := startProgressEvery(e, 5*time.Millisecond, false, func() string { return "produced 7" })
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(buf.String(), "\n") < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // polling a buffer filled by a ticker
	}
	p.Stop()
	out := buf.String()
	if strings.Count(out, "raftmq: produced 7") < 2 || strings.Contains(out, "\r") {
		t.Fatalf("progress without a terminal: %q", out)
	}
	buf = syncBuffer{}
	e.quiet = true
	p = startProgressEvery(e, time.Millisecond, false, func() string { return "x" })
	time.Sleep(20 * time.Millisecond) // long enough for ~20 ticks if it printed
	p.Stop()
	if buf.String() != "" {
		t.Fatalf("--quiet printed %q", buf.String())
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The report of `verify --json` is parsed into fields, per store.
func TestParseVerifyReport(t *testing.T) {
	report := "d1/store: warning: torn tail at 100\n" +
		"d1/store: ok min=0 confirm=4096 checkpoint=4000 last=12/3 entries=12 messages=50 queues=4 errors=0 warnings=1\n" +
		"d2/store: error: queue 1 unit 3 points at 77\n" +
		"d2/store: FAILED min=0 confirm=4096 checkpoint=-1 last=12/3 entries=12 messages=50 queues=4 errors=1 warnings=0\n" +
		"compare: 2 replicas identical in [0,4096)\n"
	got := parseVerifyReport(report)
	if len(got.Stores) != 2 || got.Comparison == nil || !got.Comparison.OK || len(got.Other) != 0 {
		t.Fatalf("parsed %+v", got)
	}
	s1, s2 := got.Stores[0], got.Stores[1]
	if !s1.OK || s1.Fields["confirm"] != 4096 || s1.Fields["messages"] != 50 || s1.Last != "12/3" || len(s1.Warnings) != 1 {
		t.Fatalf("store 1 %+v", s1)
	}
	if s2.OK || s2.Fields["checkpoint"] != -1 || len(s2.Errors) != 1 || s2.Errors[0] != "queue 1 unit 3 points at 77" {
		t.Fatalf("store 2 %+v", s2)
	}
	if c := parseVerifyReport("compare: error: a and b differ at offset 9 (x vs y)\n").Comparison; c == nil || c.OK {
		t.Fatalf("differing replicas: %+v", c)
	}
}

// A whole session against an in-process server over a real store.
func TestSession(t *testing.T) {
	s := transporttest.StartT(t)
	srv := "--server=" + s.Addr
	ack := filepath.Join(t.TempDir(), "acks.tsv")

	// Global flags anywhere, flags between positional arguments.
	out := mustRun(t, "topic", "create", "--json", "T", "--server", s.Addr, "--queues", "2")
	if !strings.Contains(out, `"queues":2`) {
		t.Fatalf("create: %q", out)
	}
	if code, _, stderr := runCLI(t, srv, "topic", "create", "T"); code != exitFail || !strings.Contains(stderr, "exists") {
		t.Fatalf("duplicate create: %d %q", code, stderr)
	}
	out = mustRun(t, srv, "topic", "list")
	if !strings.Contains(out, "T\t2") {
		t.Fatalf("list: %q", out)
	}
	mustRun(t, srv, "produce", "-t", "T", "-n", "50", "-s", "100", "--key", "K", "--tag", "red", "--ack-log", ack, "--batch", "7")
	acks := readAcks(t, ack)
	if len(acks) != 50 {
		t.Fatalf("%d ack lines", len(acks))
	}

	out = mustRun(t, srv, "--json", "consume", "-t", "T", "--to-end")
	seen := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var m messageJSON
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("bad json %q: %v", sc.Text(), err)
		}
		want, ok := acks[m.MsgID]
		if !ok || want != [2]int64{int64(m.QueueID), m.QueueOffset} {
			t.Fatalf("message %s at %d/%d not as acknowledged (%v)", m.MsgID, m.QueueID, m.QueueOffset, want)
		}
		if !strings.HasPrefix(m.Body, m.MsgID) || len(m.Body) != 100 || m.Tags != "red" || len(m.Keys) != 1 || m.Keys[0] != "K" {
			t.Fatalf("message %+v", m)
		}
		seen[m.MsgID] = true
	}
	if len(seen) != 50 {
		t.Fatalf("consumed %d distinct messages, want 50", len(seen))
	}

	// Group mode: reads 5, commits, then continues where it stopped.
	out = mustRun(t, srv, "consume", "-t", "T", "-q", "0", "--group", "g", "-n", "5")
	if n := strings.Count(out, "\n"); n != 5 {
		t.Fatalf("group consume printed %d lines", n)
	}
	out = mustRun(t, srv, "consume", "-t", "T", "-q", "0", "--group", "g", "--to-end")
	q0 := 0
	for _, a := range acks {
		if a[0] == 0 {
			q0++
		}
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != q0-5 {
		t.Fatalf("second group consume read %d of queue 0's %d messages, want %d", len(lines), q0, q0-5)
	}
	for _, line := range lines {
		var topic string
		var q, off int64
		if _, err := fmt.Sscanf(line, "%s\t%d\t%d", &topic, &q, &off); err != nil || off < 5 {
			t.Fatalf("group re-read an early offset: %q (%v)", line, err)
		}
	}

	var id string
	for k := range acks {
		id = k
		break
	}
	out = mustRun(t, srv, "query", "--msg-id", id)
	if !strings.Contains(out, id) {
		t.Fatalf("query by id: %q", out)
	}
	out = mustRun(t, srv, "--json", "query", "--key", "K", "-t", "T")
	if n := strings.Count(out, "\n"); n != 50 {
		t.Fatalf("query by key found %d", n)
	}
	if code, _, _ := runCLI(t, srv, "query", "--msg-id", "nope"); code != exitFail {
		t.Fatalf("missing id: exit %d", code)
	}

	out = mustRun(t, srv, "--json", "bench", "produce", "-t", "T", "-n", "200", "-s", "64", "-c", "2", "--batch", "10")
	var sum map[string]any
	if err := json.Unmarshal([]byte(out), &sum); err != nil || sum["count"].(float64) != 200 || sum["errors"].(float64) != 0 {
		t.Fatalf("bench summary %q: %v", out, err)
	}
	for _, k := range []string{"seconds", "msgs_per_s", "mb_per_s", "p50_ms", "p99_ms", "p999_ms"} {
		if _, ok := sum[k]; !ok {
			t.Fatalf("bench summary lacks %s: %q", k, out)
		}
	}
	// Pipelined, open loop: every message is acknowledged exactly once and
	// the summary echoes the shape of the run.
	out = mustRun(t, srv, "--json", "bench", "produce", "-t", "T", "-n", "300", "-s", "64", "-c", "2",
		"--batch", "5", "--inflight", "4", "--rate", "3000")
	if err := json.Unmarshal([]byte(out), &sum); err != nil || sum["count"].(float64) != 300 ||
		sum["errors"].(float64) != 0 || sum["inflight"].(float64) != 4 || sum["batch"].(float64) != 5 {
		t.Fatalf("pipelined bench summary %q: %v", out, err)
	}
	if secs := sum["seconds"].(float64); secs < 0.09 { // 300 msgs at 3000/s cannot finish in < 0.1 s
		t.Fatalf("open loop at 3000/s took %.3fs for 300 messages", secs)
	}
	code, out, stderr := runCLI(t, srv, "--json", "bench", "e2e", "-t", "T", "-n", "100", "-s", "64", "-c", "2")
	if err := json.Unmarshal([]byte(out), &sum); code != exitOK || err != nil || sum["count"].(float64) < 100 {
		t.Fatalf("e2e exit %d summary %q stderr %q: %v", code, out, stderr, err)
	}
	out = mustRun(t, srv, "--json", "cluster", "status")
	if !strings.Contains(out, `"leaderId":"local"`) || !strings.Contains(out, `"hasLeader":true`) {
		t.Fatalf("status %q", out)
	}
	// The JSON has every column of the table.
	var st struct{ Members []map[string]any }
	if err := json.Unmarshal([]byte(out), &st); err != nil || len(st.Members) != 1 {
		t.Fatalf("status members %q: %v", out, err)
	}
	for _, k := range []string{"id", "suffrage", "raftAddr", "apiAddr", "state", "commitIndex", "appliedIndex", "confirmOffset", "maxOffset"} {
		if _, ok := st.Members[0][k]; !ok {
			t.Fatalf("status member lacks %s: %q", k, out)
		}
	}
	mustRun(t, srv, "topic", "delete", "T")
	if code, _, _ := runCLI(t, srv, "topic", "describe", "T"); code != exitFail {
		t.Fatalf("describe deleted topic: exit %d", code)
	}
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	code, out, stderr := runCLI(t, args...)
	if code != exitOK {
		t.Fatalf("%q: exit %d, stderr %q", args, code, stderr)
	}
	return out
}

// readAcks maps msgId to (queueId, queueOffset).
func readAcks(t *testing.T, path string) map[string][2]int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][2]int64{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var id, topic string
		var q, off int64
		if _, err := fmt.Sscanf(line, "%s\t%s\t%d\t%d", &id, &topic, &q, &off); err != nil || topic != "T" {
			t.Fatalf("ack line %q: %v", line, err)
		}
		if _, dup := out[id]; dup {
			t.Fatalf("duplicate msgId %s", id)
		}
		out[id] = [2]int64{q, off}
	}
	return out
}

// TestProduceDelayed: --delay keeps the messages out of their topic until
// they are due and the scheduler delivers them (the test backend's
// DeliverDue stands in for the cluster's scheduler); --deliver-at in the
// past stores them at once.
func TestProduceDelayed(t *testing.T) {
	s := transporttest.StartT(t)
	srv := "--server=" + s.Addr
	mustRun(t, srv, "topic", "create", "D", "--queues", "2")
	sent := time.Now()
	mustRun(t, srv, "produce", "-t", "D", "-n", "5", "--delay", "300ms")
	if out := mustRun(t, srv, "consume", "-t", "D", "--to-end"); out != "" {
		t.Fatalf("delayed messages visible at once: %q", out)
	}
	delivered := 0
	for delivered < 5 && time.Since(sent) < 10*time.Second {
		n, err := s.Backend.DeliverDue()
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 && time.Since(sent) < 300*time.Millisecond {
			t.Fatalf("%d delivered %v after sending, before the delay", n, time.Since(sent))
		}
		delivered += n
		time.Sleep(20 * time.Millisecond) // the scheduler's tick: a rate, not a condition
	}
	if delivered != 5 {
		t.Fatalf("%d of 5 delivered", delivered)
	}
	if out := mustRun(t, srv, "consume", "-t", "D", "--to-end"); strings.Count(out, "\n") != 5 {
		t.Fatalf("after delivery: %q", out)
	}
	mustRun(t, srv, "produce", "-t", "D", "-n", "3", "--deliver-at", time.Now().Add(-time.Minute).UTC().Format(time.RFC3339))
	if out := mustRun(t, srv, "consume", "-t", "D", "--to-end"); strings.Count(out, "\n") != 8 {
		t.Fatalf("a past --deliver-at is stored at once: %q", out)
	}
}
