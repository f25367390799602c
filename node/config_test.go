package node

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoadPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "raftmq.toml")
	err := os.WriteFile(file, []byte(`
id = "file"
dir = "/file"
api_addr = "127.0.0.1:9100"
peers = "a=127.0.0.1:1,b=127.0.0.1:2"
[raft]
heartbeat_timeout = "2s"
election_timeout = "2s"
[store]
MaxQueues = 64
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"RAFTMQ_CONFIG": file, "RAFTMQ_ID": "env", "RAFTMQ_DIR": "/env"}
	cfg, err := Load([]string{"--id", "flag", "--bootstrap"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case cfg.ID != "flag", cfg.Dir != "/env", cfg.APIAddr != "127.0.0.1:9100", cfg.HTTPAddr != "127.0.0.1:8001":
		t.Fatalf("precedence: %+v", cfg)
	case !cfg.Bootstrap || len(cfg.Peers) != 2 || cfg.Peers[1] != (Peer{"b", "127.0.0.1:2"}):
		t.Fatalf("bootstrap/peers: %v %v", cfg.Bootstrap, cfg.Peers)
	case cfg.Raft.HeartbeatTimeout != 2*time.Second || cfg.Store.MaxQueues != 64:
		t.Fatalf("file sections: %v %d", cfg.Raft.HeartbeatTimeout, cfg.Store.MaxQueues)
	}
}

func TestDefaultsValid(t *testing.T) {
	cfg, err := Load(nil, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if cfg.ID != "n1" || cfg.Dir != "./data" || cfg.RaftAddr != "127.0.0.1:7001" {
		t.Fatalf("defaults %+v", cfg)
	}
}

func TestValidateMessages(t *testing.T) {
	cases := map[string]func(*Config){
		"join and bootstrap":   func(c *Config) { c.Join, c.Bootstrap = "x:1", true },
		"peers without self":   func(c *Config) { c.Bootstrap, c.Peers = true, PeerList{{"n2", "127.0.0.1:2"}} },
		"unspecified raft":     func(c *Config) { c.RaftAddr = "0.0.0.0:7001" },
		"lease > heartbeat":    func(c *Config) { c.Raft.LeaderLeaseTimeout = 10 * time.Second },
		"max append too large": func(c *Config) { c.Raft.MaxAppendEntries = 2048 },
		"bad id":               func(c *Config) { c.ID = "a=b" },
		"no group commit":      func(c *Config) { c.GroupCommit.MaxMessages = 0 },
	}
	for name, mut := range cases {
		c := DefaultConfig()
		mut(&c)
		err := c.Validate()
		if !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := Load([]string{"--peers", "nonsense"}, func(string) string { return "" }, io.Discard); err == nil || !strings.Contains(err.Error(), "id=raftaddr") {
		t.Errorf("bad peers flag: %v", err)
	}
}
