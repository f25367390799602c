package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/transport/transporttest"
)

func TestTopicUpdate(t *testing.T) {
	s := transporttest.StartT(t)
	srv := "--server=" + s.Addr
	mustRun(t, srv, "topic", "create", "T", "--queues", "2")

	out := mustRun(t, srv, "topic", "update", "T", "--queues", "6")
	if !strings.Contains(out, "6 queues, perm 6") {
		t.Fatalf("grow: %q", out)
	}
	out = mustRun(t, srv, "--json", "topic", "update", "T", "--perm", "4") // queues kept
	var got struct {
		Topic        string
		Queues, Perm int
		Updated      bool
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.Queues != 6 || got.Perm != 4 || !got.Updated {
		t.Fatalf("perm-only update: %q (%v)", out, err)
	}
	// Queues 2..5 exist now: produce to all of them and see them described.
	mustRun(t, srv, "produce", "-t", "T", "-n", "12", "-s", "10")
	out = mustRun(t, srv, "topic", "describe", "T")
	if !strings.Contains(out, "\n5 ") && !strings.Contains(out, "\n5\t") {
		t.Fatalf("describe after growth has no queue 5: %q", out)
	}

	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"topic", "update", "T", "--queues", "3"}, exitFail, "shrink"},
		{[]string{"topic", "update", "nope", "--queues", "8"}, exitFail, "nope"},
		{[]string{"topic", "update", "T"}, exitUsage, "--queues or --perm"},
		{[]string{"topic", "update", "T", "--perm", "9"}, exitUsage, "--perm"},
		{[]string{"topic", "update"}, exitUsage, "topic update T"},
	} {
		code, _, stderr := runCLI(t, append([]string{srv}, c.args...)...)
		if code != c.code || !strings.Contains(stderr, c.msg) {
			t.Errorf("%q: exit %d (want %d), stderr %q (want %q)", c.args, code, c.code, stderr, c.msg)
		}
	}
}
