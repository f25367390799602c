package main

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/vfs"
)

func runVerify(e *env, g *globals, args []string) error {
	fs := newFlagSet("verify", e.stderr)
	pos, err := parse(e, g, fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("usage: verify DIR [DIR...]")
	}
	return verify(e, pos)
}

// verify runs the offline store verification (internal consistency of each
// data dir, and replicas byte-identical up to their common confirmOffset).
func verify(e *env, dirs []string) error {
	if !e.json {
		err := store.Verify(vfs.OS(), dirs, e.stdout)
		if err == nil {
			fmt.Fprintf(e.stdout, "verified %d store(s): OK\n", len(dirs))
		}
		return err
	}
	var report bytes.Buffer
	err := store.Verify(vfs.OS(), dirs, &report)
	out := map[string]any{"ok": err == nil, "dirs": dirs, "report": report.String()}
	if err != nil {
		out["error"] = err.Error()
	}
	return errors.Join(e.emit(out), err)
}
