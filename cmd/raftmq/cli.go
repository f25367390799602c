package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/mattn/go-isatty"

	"github.com/raftmq/raftmq/client"
)

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

const usageText = `usage: raftmq [--server host:port[,host:port...]] [--json] COMMAND ...

commands:
  topic create T [--queues N] | list | describe T | delete T
  produce -t T [-n N] [-s SIZE] [--key K] [--tag TAG] [--body B] [--ack-log FILE] [--batch B] [-c C]
  consume -t T [-q Q] [--from OFFSET | --group G] [-n N] [--to-end] [--tag TAG]
  query --key K -t T | --msg-id ID [-t T]
  cluster status | join ID RAFTADDR APIADDR | remove ID | transfer [ID]
  bench produce|consume|e2e -t T [-n N] [-s SIZE] [-c C] [--duration D] [--rate R] [--batch B]
  verify DIR [DIR...]

Global flags may appear anywhere. Exit status: 0 ok, 1 failed, 2 bad usage.
`

// usageError marks bad command-line usage (exit status 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// env is what every command gets: global options and the output streams.
type env struct {
	ctx     context.Context
	servers []string
	json    bool
	stdout  io.Writer
	stderr  io.Writer
	enc     *json.Encoder
}

// globals are registered on every flag set so they may appear anywhere.
type globals struct {
	server string
	json   bool
}

func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.server, "server", g.server, "comma-separated API addresses")
	fs.BoolVar(&g.json, "json", g.json, "print JSON, one object per line")
}

type command func(e *env, g *globals, args []string) error

func lookup(name string) (command, bool) {
	cmds := map[string]command{
		"topic":   runTopic,
		"produce": runProduce,
		"consume": runConsume,
		"query":   runQuery,
		"cluster": runCluster,
		"bench":   runBench,
		"verify":  runVerify,
	}
	c, ok := cmds[name]
	return c, ok
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	g := &globals{server: "127.0.0.1:9001"}
	fs := newFlagSet("raftmq", stderr)
	g.register(fs)
	fs.Usage = func() { fmt.Fprint(stderr, usageText) }
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	rest := fs.Args()
	if len(rest) == 0 || rest[0] == "help" {
		fmt.Fprint(stderr, usageText)
		if len(rest) == 0 {
			return exitUsage
		}
		return exitOK
	}
	cmd, ok := lookup(rest[0])
	if !ok {
		fmt.Fprintf(stderr, "raftmq: unknown command %q\n%s", rest[0], usageText)
		return exitUsage
	}
	e := &env{ctx: ctx, stdout: stdout, stderr: stderr, enc: json.NewEncoder(stdout)}
	err := cmd(e, g, rest[1:])
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "raftmq %s: %v\n", rest[0], err)
		return exitUsage
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	default:
		fmt.Fprintf(stderr, "raftmq %s: %v\n", rest[0], err)
		return exitFail
	}
}

func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parse parses flags interleaved with positional arguments and applies the
// global flags; it returns the positional arguments.
func parse(e *env, g *globals, fs *flag.FlagSet, args []string) ([]string, error) {
	g.register(fs)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usagef("%v", err)
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		if args[0] == "--" {
			pos = append(pos, args[1:]...)
			break
		}
		pos, args = append(pos, args[0]), args[1:]
	}
	e.json = g.json
	e.servers = nil
	for _, s := range strings.Split(g.server, ",") {
		if s = strings.TrimSpace(s); s != "" {
			e.servers = append(e.servers, s)
		}
	}
	if len(e.servers) == 0 {
		return nil, usagef("--server is empty")
	}
	return pos, nil
}

// connect opens a client on the --server addresses.
func (e *env) connect() (*client.Client, error) {
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	return client.New(ctx, e.servers, client.Options{ProbeTimeout: 3 * time.Second})
}

// emit prints v as one JSON line.
func (e *env) emit(v any) error { return e.enc.Encode(v) }

// isTerminal reports whether w is a terminal (progress goes only there).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

func requireArgs(pos []string, min, max int, what string) error {
	if len(pos) < min || (max >= 0 && len(pos) > max) {
		return usagef("usage: %s", what)
	}
	return nil
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			found = true
		}
	})
	return found
}
