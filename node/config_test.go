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

// TestStoreSizeSettings: the [store] size settings load from the TOML file
// under their field names, a bad value stops the node with an error naming
// the key, and a misspelt key is refused by name.
func TestStoreSizeSettings(t *testing.T) {
	load := func(body string) (Config, error) {
		file := filepath.Join(t.TempDir(), "raftmq.toml")
		if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return Load([]string{"--config", file}, func(string) string { return "" }, io.Discard)
	}
	cfg, err := load("[store]\nCommitLogFileSize = 67108864\nPreallocateSegments = 0\nConsumeQueueFileSize = 600000\n")
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("small store: %v", err)
	}
	if cfg.Store.CommitLogFileSize != 64<<20 || cfg.Store.PreallocateSegments != 0 || cfg.Store.ConsumeQueueFileSize != 600000 {
		t.Fatalf("store settings not loaded: %+v", cfg.Store)
	}
	if d := DefaultConfig().Store; d.CommitLogFileSize != 1<<30 || d.PreallocateSegments != 1 || d.ConsumeQueueFileSize != 300000*20 {
		t.Fatalf("defaults are not RocketMQ's: segment %d, ahead %d, consume queue %d", d.CommitLogFileSize, d.PreallocateSegments, d.ConsumeQueueFileSize)
	}
	for key, body := range map[string]string{
		"CommitLogFileSize":    "CommitLogFileSize = 1000",
		"ConsumeQueueFileSize": "ConsumeQueueFileSize = 7",
		"PreallocateSegments":  "PreallocateSegments = 99",
	} {
		cfg, err := load("[store]\n" + body + "\n")
		if err != nil {
			t.Fatal(err)
		}
		err = cfg.Validate()
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "[store]") || !strings.Contains(err.Error(), key+" = ") {
			t.Fatalf("%s: %v, want an error naming [store] %s", body, err, key)
		}
	}
	if _, err := load("[store]\nPreallocateSegmets = 2\n"); !errors.Is(err, ErrUnknownKey) || !strings.Contains(err.Error(), "store.PreallocateSegmets") {
		t.Fatalf("misspelt key: %v", err)
	}
}

func TestSecuritySettings(t *testing.T) {
	load := func(args ...string) error {
		cfg, err := Load(args, func(string) string { return "" }, io.Discard)
		if err != nil {
			return err
		}
		return cfg.Validate()
	}
	for _, args := range [][]string{
		{"--tls-cert", "a.pem"},
		{"--tls-cert", "a.pem", "--tls-key", "a-key.pem"},
		{"--tls-ca", "ca.pem"},
	} {
		if err := load(args...); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "go together") {
			t.Errorf("%v: %v", args, err)
		}
	}
	file := filepath.Join(t.TempDir(), "limits.toml")
	for body, ok := range map[string]bool{
		"[limits]\nproduce_messages_per_second = 100\nmax_topics = 10\n": true,
		"[limits]\nproduce_bytes_per_second = -1\n":                      false,
		"[limits]\nmax_request_bytes = 1000\n":                           false,
		"[limits]\nlong_polls = 3\n":                                     false,
	} {
		if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := load("--config", file); (err == nil) != ok {
			t.Errorf("%q: %v", body, err)
		}
	}
	// A node with TLS files that do not exist, or an auth file without a
	// node token, does not start.
	cfg := DefaultConfig()
	cfg.Dir = t.TempDir()
	cfg.TLSCert, cfg.TLSKey, cfg.TLSCA = "/nonexistent/n1.pem", "/nonexistent/n1-key.pem", "/nonexistent/ca.pem"
	if _, err := openSecurity(cfg); err == nil {
		t.Error("missing TLS files accepted")
	}
	cfg = DefaultConfig()
	cfg.AuthFile = filepath.Join(t.TempDir(), "auth.toml")
	if err := os.WriteFile(cfg.AuthFile, []byte("[[users]]\nname = \"a\"\ncert_cn = \"a\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := openSecurity(cfg); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "node_token") {
		t.Errorf("auth file without node_token: %v", err)
	}
}
