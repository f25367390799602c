package node

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// option is one setting with its flag name, env var and config-file key
// (the file key is the toml tag of the Config field it sets).
type option struct {
	flag, usage string
	isBool      bool
	set         func(c *Config, v string) error
}

func str(dst func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error { *dst(c) = v; return nil }
}

var options = []option{
	{flag: "id", usage: "server id", set: str(func(c *Config) *string { return &c.ID })},
	{flag: "dir", usage: "data directory", set: str(func(c *Config) *string { return &c.Dir })},
	{flag: "raft-addr", usage: "Raft address (host:port)", set: str(func(c *Config) *string { return &c.RaftAddr })},
	{flag: "api-addr", usage: "gRPC API address", set: str(func(c *Config) *string { return &c.APIAddr })},
	{flag: "http-addr", usage: "HTTP address (/healthz, /status, /metrics)", set: str(func(c *Config) *string { return &c.HTTPAddr })},
	{flag: "remoting-addr", usage: `RocketMQ broker protocol address ("" turns it off)`, set: str(func(c *Config) *string { return &c.RemotingAddr })},
	{flag: "namesrv-addr", usage: `RocketMQ name-server protocol address ("" turns it off)`, set: str(func(c *Config) *string { return &c.NamesrvAddr })},
	{flag: "join", usage: "API address of a member to join through", set: str(func(c *Config) *string { return &c.Join })},
	{flag: "tls-cert", usage: "PEM certificate of this node (TLS on every port, with --tls-key and --tls-ca)", set: str(func(c *Config) *string { return &c.TLSCert })},
	{flag: "tls-key", usage: "PEM private key of --tls-cert", set: str(func(c *Config) *string { return &c.TLSKey })},
	{flag: "tls-ca", usage: "PEM CA bundle of the cluster: peers and client certificates must chain to it", set: str(func(c *Config) *string { return &c.TLSCA })},
	{flag: "auth-file", usage: "auth file: tokens, certificate names, RocketMQ keys and their roles (turns on authentication)", set: str(func(c *Config) *string { return &c.AuthFile })},
	{flag: "log-level", usage: "trace, debug, info, warn, error", set: str(func(c *Config) *string { return &c.LogLevel })},
	{flag: "peers", usage: "static members id=raftaddr,... (with --bootstrap)", set: func(c *Config, v string) error {
		return c.Peers.UnmarshalText([]byte(v))
	}},
	{flag: "bootstrap", usage: "form a new cluster from --peers (or alone)", isBool: true, set: func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%w: bootstrap %q: %v", ErrConfig, v, err)
		}
		c.Bootstrap = b
		return nil
	}},
}

// EnvName is the environment variable of a flag: RAFTMQ_ + upper snake case.
func EnvName(flagName string) string {
	return "RAFTMQ_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Load builds a Config from DefaultConfig, then the TOML file named by
// --config or RAFTMQ_CONFIG, then RAFTMQ_* variables, then flags. getenv
// is os.Getenv in production. Usage goes to usage (flag.ErrHelp on -h).
func Load(args []string, getenv func(string) string, usage io.Writer) (Config, error) {
	fs := flag.NewFlagSet("raftmq-node", flag.ContinueOnError)
	fs.SetOutput(usage)
	values := map[string]*string{}
	for _, o := range options {
		if o.isBool {
			values[o.flag] = new(string)
			fs.BoolFunc(o.flag, o.usage+" (env "+EnvName(o.flag)+")", boolFlag(values[o.flag]))
			continue
		}
		values[o.flag] = fs.String(o.flag, "", o.usage+" (env "+EnvName(o.flag)+")")
	}
	configPath := fs.String("config", "", "TOML config file (env RAFTMQ_CONFIG)")
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("%w: unexpected arguments %q", ErrConfig, fs.Args())
	}
	cfg := DefaultConfig()
	path := *configPath
	if path == "" {
		path = getenv("RAFTMQ_CONFIG")
	}
	if path != "" {
		md, err := toml.DecodeFile(path, &cfg)
		if err != nil {
			return Config{}, fmt.Errorf("%w: config file %s: %w", ErrConfig, path, err)
		}
		if err := unknownKeys(path, md); err != nil {
			return Config{}, err
		}
	}
	for _, o := range options {
		if v := getenv(EnvName(o.flag)); v != "" {
			if err := o.set(&cfg, v); err != nil {
				return Config{}, fmt.Errorf("%s: %w", EnvName(o.flag), err)
			}
		}
	}
	var err error
	fs.Visit(func(f *flag.Flag) {
		for _, o := range options {
			if o.flag == f.Name && err == nil {
				err = o.set(&cfg, *values[o.flag])
			}
		}
	})
	return cfg, err
}

// ErrUnknownKey is wrapped (with ErrConfig) when the config file has a key
// that no setting reads: a typo must not start a node on defaults.
var ErrUnknownKey = errors.New("unknown key")

// unknownKeys fails on the first key of the file that was not decoded into
// the Config, naming it with its table ("group_commit.max_bytes") and the
// rest of them.
func unknownKeys(path string, md toml.MetaData) error {
	und := md.Undecoded()
	if len(und) == 0 {
		return nil
	}
	names := make([]string, len(und))
	for i, k := range und {
		names[i] = k.String()
	}
	return fmt.Errorf("%w: config file %s: %w %q (not a raftmq-node setting; all unknown: %s)",
		ErrConfig, path, ErrUnknownKey, names[0], strings.Join(names, ", "))
}

// boolFlag lets --bootstrap be given bare (true) or as --bootstrap=false.
func boolFlag(dst *string) func(string) error {
	return func(v string) error {
		if _, err := strconv.ParseBool(v); err != nil {
			return err
		}
		*dst = v
		return nil
	}
}
