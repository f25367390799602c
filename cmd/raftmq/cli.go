package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/buildinfo"
)

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// defaultServer is --server's default when RAFTMQ_SERVER is not set.
const defaultServer = "127.0.0.1:9001"

// usageError marks bad command-line usage (exit status 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// env is what every command gets: global options and the output streams.
type env struct {
	ctx     context.Context
	server  string // --server as given
	servers []string
	sec     security // --tls-ca, --tls-cert, --tls-key, --token
	json    bool
	debug   bool
	quiet   bool
	stdout  io.Writer
	stderr  io.Writer
	enc     *json.Encoder
	ran     bool // a command's own code started: errors since are its own
}

// action wraps a command's code: it marks that parsing and validation are
// over (an error from here on is the operation's, exit 1, unless it is a
// usageError) and passes the env.
func (e *env) action(fn func(e *env, cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		e.ran = true
		return fn(e, cmd, args)
	}
}

// offline marks commands that never dial, so --server is not checked.
const offline = "offline"

// dials reports whether cmd talks to the cluster (then --server must be
// valid): not the root, verify, help, or shell completion.
func dials(cmd *cobra.Command) bool {
	if !cmd.HasParent() {
		return false
	}
	for c := cmd; c != nil; c = c.Parent() {
		switch c.Name() {
		case "help", "completion", cobra.ShellCompRequestCmd, cobra.ShellCompNoDescRequestCmd:
			return false
		}
		if c.Annotations[offline] != "" {
			return false
		}
	}
	return true
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runWithInput(ctx, args, nil, stdout, stderr)
}

// runWithInput is run with stdin as the commands' input (nil: os.Stdin).
func runWithInput(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{ctx: ctx, stdout: stdout, stderr: stderr, enc: json.NewEncoder(stdout)}
	root := newRoot(e)
	root.SetArgs(args)
	if stdin != nil {
		root.SetIn(stdin)
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	if cmd == nil {
		cmd = root
	}
	var ue *usageError
	if !e.ran || errors.As(err, &ue) {
		fmt.Fprintf(stderr, "%s: %s\nRun '%s --help' for usage.\n", cmd.CommandPath(), errLine(err, true), cmd.CommandPath())
		return exitUsage
	}
	fmt.Fprintf(stderr, "%s: %s\n", cmd.CommandPath(), errLine(err, e.debug))
	return exitFail
}

func newRoot(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "raftmq",
		Short: "Client and admin tool of a raftmq cluster",
		Long: `raftmq produces, consumes and queries messages of a raftmq cluster and
administers its topics and members. Global flags may appear anywhere.

Security: --tls-ca dials TLS (the server's certificate must chain to the
CA and name the host dialled); --tls-cert and --tls-key present a client
certificate; --token sends a bearer token with every call (set
RAFTMQ_TOKEN instead to keep it out of ps; without TLS the token crosses
the network in the clear). A TLS file that is missing or malformed is bad
usage. 'raftmq certs' makes a CA and certificates, 'raftmq auth' tokens,
both offline.

Exit status: 0 success, 1 the operation failed, 2 bad usage.`,
		Version:       buildinfo.String("raftmq"),
		SilenceErrors: true,
		SilenceUsage:  true,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return unknownCommand(cmd, args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return usagef("missing command (one of: %s)", subcommandNames(cmd))
		},
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if !dials(cmd) {
				return nil
			}
			servers, err := parseServers(e.server)
			if err != nil {
				return err
			}
			e.servers = servers
			return e.sec.load(cmd.Flags())
		},
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{msg: err.Error()} })
	server := os.Getenv("RAFTMQ_SERVER")
	if server == "" {
		server = defaultServer
	}
	pf := root.PersistentFlags()
	pf.StringVar(&e.server, "server", server, "comma-separated API addresses host:port (env RAFTMQ_SERVER)")
	securityFlags(&e.sec, pf)
	pf.BoolVar(&e.json, "json", false, "print JSON, one object per line")
	pf.BoolVar(&e.debug, "debug", false, "print errors with their whole gRPC detail")
	pf.BoolVar(&e.quiet, "quiet", false, "no progress lines on stderr")
	root.AddCommand(topicCmd(e), produceCmd(e), consumeCmd(e), groupCmd(e), queryCmd(e), clusterCmd(e), benchCmd(e), verifyCmd(e), certsCmd(e), authCmd(e))
	return root
}

// group returns a command that only holds subcommands: without one it is
// bad usage (exit 2), and an unknown one is named.
func group(use, short string, subs ...*cobra.Command) *cobra.Command {
	g := &cobra.Command{
		Use:   use,
		Short: short,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return unknownCommand(cmd, args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return usagef("missing subcommand (one of: %s)", subcommandNames(cmd))
		},
	}
	g.AddCommand(subs...)
	return g
}

func unknownCommand(cmd *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown %s command %q (one of: %s)", strings.TrimPrefix(cmd.CommandPath(), "raftmq "), name, subcommandNames(cmd))
	if !cmd.HasParent() {
		msg = fmt.Sprintf("unknown command %q (one of: %s)", name, subcommandNames(cmd))
	}
	if s := cmd.SuggestionsFor(name); len(s) > 0 {
		msg += fmt.Sprintf("; did you mean %s?", strings.Join(s, " or "))
	}
	return usagef("%s", msg)
}

func subcommandNames(cmd *cobra.Command) string {
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() && c.Name() != "help" && c.Name() != "completion" {
			names = append(names, c.Name())
		}
	}
	return strings.Join(names, ", ")
}

// positional checks the number of positional arguments.
func positional(min, max int, usage string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < min || (max >= 0 && len(args) > max) {
			return usagef("usage: %s", usage)
		}
		return nil
	}
}

// noArgs refuses positional arguments, naming the first.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unexpected argument %q", args[0])
	}
	return nil
}

// parseServers splits --server and checks every address is host:port with
// a numeric port, before anything is dialled ("localhost" alone would
// otherwise be dialled as localhost:443).
func parseServers(list string) ([]string, error) {
	var servers []string
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		host, port, err := net.SplitHostPort(s)
		if err != nil {
			var ae *net.AddrError
			if errors.As(err, &ae) && strings.Contains(ae.Err, "missing port") {
				return nil, usagef("--server %q: missing port (want host:port, e.g. %s:9001)", s, s)
			}
			return nil, usagef("--server %q: not host:port: %v", s, err)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return nil, usagef("--server %q: port %q is not a number in [1, 65535]", s, port)
		}
		if host == "" {
			return nil, usagef("--server %q: missing host (want host:port)", s)
		}
		servers = append(servers, s)
	}
	if len(servers) == 0 {
		return nil, usagef("--server is empty (want host:port[,host:port...])")
	}
	return servers, nil
}

// connect opens a client on the --server addresses.
func (e *env) connect() (*client.Client, error) {
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	c, err := client.New(ctx, e.servers, e.sec.options(3*time.Second, 0))
	if err != nil && e.sec.tls == nil && strings.Contains(err.Error(), "server preface") {
		// What a TLS server does to a plaintext client (and a dying node
		// to any client): it closes the connection without a word.
		return nil, fmt.Errorf("the server closed the connection (does it serve TLS? then give --tls-ca): %w", err)
	}
	return c, err
}

// emit prints v as one JSON line.
func (e *env) emit(v any) error { return e.enc.Encode(v) }

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// errLine renders err as one line. Without debug the gRPC status chain
// ("rpc error: code = Unavailable desc = connection error: desc = ...") is
// cut to its innermost description; --debug prints everything.
func errLine(err error, debug bool) string {
	s := err.Error()
	if !debug {
		if i := strings.Index(s, "rpc error: code = "); i >= 0 {
			s = s[:i] + grpcDetail(err, s[i:])
		}
		s = strings.ReplaceAll(s, "client: ", "")
	}
	return strings.Join(strings.Fields(s), " ")
}

// grpcDetail returns the innermost description of the gRPC status in err
// (or of the text rest, which starts with "rpc error: ").
func grpcDetail(err error, rest string) string {
	msg := rest
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) && se.GRPCStatus() != nil {
		msg = se.GRPCStatus().Message()
	}
	if i := strings.LastIndex(msg, "desc = "); i >= 0 {
		msg = msg[i+len("desc = "):]
	}
	msg = strings.Trim(msg, `"`)
	for _, p := range []string{"transport: ", "Error while dialing: ", "error while dialing: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	return msg
}

// completeTopics completes topic names from the cluster (shell completion
// of `topic describe T`, `-t T`, ...). It gives nothing when the cluster is
// not reachable within a second or two.
func completeTopics(e *env) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		servers, err := parseServers(e.server)
		if err != nil || e.sec.load(cmd.Flags()) != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(e.ctx, 2*time.Second)
		defer cancel()
		c, err := client.New(ctx, servers, e.sec.options(time.Second, time.Second))
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		defer c.Close()
		ts, err := c.ListTopics(ctx)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, t := range ts {
			if strings.HasPrefix(t.Name, toComplete) {
				out = append(out, t.Name)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeFirstTopic completes the first positional argument only.
func completeFirstTopic(e *env) cobra.CompletionFunc {
	topics := completeTopics(e)
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return topics(cmd, args, toComplete)
	}
}

// topicFlag registers -t/--topic with completion of topic names.
func topicFlag(e *env, cmd *cobra.Command, dst *string, usage string) {
	cmd.Flags().StringVarP(dst, "topic", "t", "", usage)
	_ = cmd.RegisterFlagCompletionFunc("topic", completeTopics(e))
}
