package node

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A typo in the config file is an error that names the key, in the top
// level and in a table, and a table name typo names the table.
func TestLoadUnknownKeys(t *testing.T) {
	cases := []struct{ file, want string }{
		{"apply_timout = \"5s\"\n", `"apply_timout"`},
		{"[raft]\nheartbeat_timout = \"1s\"\n", `"raft.heartbeat_timout"`},
		{"[grup_commit]\nmax_bytes = 1\n", `"grup_commit"`},
	}
	for _, c := range cases {
		path := filepath.Join(t.TempDir(), "raftmq.toml")
		if err := os.WriteFile(path, []byte(c.file), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load([]string{"--config", path}, func(string) string { return "" }, &strings.Builder{})
		if !errors.Is(err, ErrConfig) || !errors.Is(err, ErrUnknownKey) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("config %q: err %v, want ErrUnknownKey naming %s", c.file, err, c.want)
		}
	}
}

// The README's example config file loads: every key it documents is known.
func TestLoadREADMEConfig(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	// Every ```toml block of the README is a node config, except the auth
	// file's (package auth tests its format).
	rest, loaded, groupCommit := string(b), 0, false
	for {
		_, block, found := strings.Cut(rest, "```toml\n")
		if !found {
			break
		}
		block, rest, _ = strings.Cut(block, "```")
		if strings.Contains(block, "[[users]]") {
			continue
		}
		path := filepath.Join(t.TempDir(), "raftmq.toml")
		if err := os.WriteFile(path, []byte(block), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Load([]string{"--config", path}, func(string) string { return "" }, &strings.Builder{}); err != nil {
			t.Fatalf("README config refused: %v\n%s", err, block)
		}
		loaded++
		groupCommit = groupCommit || strings.Contains(block, "[group_commit]")
	}
	if loaded < 2 || !groupCommit {
		t.Fatalf("README has %d node ```toml blocks (want the settings and [limits]); one with [group_commit]: %v", loaded, groupCommit)
	}
}
