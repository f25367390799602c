package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/raftmq/raftmq/auth"
)

func authCmd(e *env) *cobra.Command {
	g := group("auth", "Make tokens and check auth files (offline)", authTokenCmd(e), authHashCmd(e), authCheckCmd(e))
	g.Long = `Make bearer tokens and check auth files, offline: nothing is dialled.

A node with an auth file authenticates every call. The file keeps only
the SHA-256 of each user's token (token_sha256), so a token is made
once, given to its user (--token or RAFTMQ_TOKEN), and its hash put in
the file:

  raftmq auth token             # a new token and its token_sha256
  raftmq auth check auth.toml   # the file parses, every user is valid`
	g.Annotations = map[string]string{offline: "true"}
	return g
}

func authTokenCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "token",
		Short: "Print a new random token (256 bits) and its SHA-256 for the auth file",
		Long: `Print a new random token (256 bits, URL-safe base64) and its hex SHA-256:
the token goes to the user (--token or RAFTMQ_TOKEN), the hash into the
auth file as token_sha256. With --json: {"token":...,"token_sha256":...}.`,
		Args: noArgs,
		RunE: e.action(func(e *env, _ *cobra.Command, _ []string) error {
			tok := auth.NewToken()
			return e.reportToken(tok, auth.HashToken(tok))
		}),
	}
}

// tokenJSON is what `auth token` and `auth hash` print with --json.
type tokenJSON struct {
	Token  string `json:"token,omitempty"`
	SHA256 string `json:"token_sha256"`
}

func (e *env) reportToken(token, hash string) error {
	if e.json {
		return e.emit(tokenJSON{Token: token, SHA256: hash})
	}
	if token != "" {
		fmt.Fprintf(e.stdout, "token\t%s\n", token)
	}
	fmt.Fprintf(e.stdout, "token_sha256\t%s\n", hash)
	return nil
}

func authHashCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "hash TOKEN|-",
		Short: "Print a token's SHA-256 (token_sha256 of the auth file)",
		Long: `Print the hex SHA-256 of TOKEN, as the auth file's token_sha256 keeps it.
With "-" the token is read from stdin (one line), which keeps it out of
ps and the shell history. A token that starts with "-" (auth token makes
such ones) goes after "--": raftmq auth hash -- -x1y2z3.
With --json: {"token_sha256":...}.`,
		Args: positional(1, 1, "auth hash TOKEN|-"),
		RunE: e.action(func(e *env, cmd *cobra.Command, args []string) error {
			tok, err := tokenArg(args[0], cmd.InOrStdin())
			if err != nil {
				return err
			}
			return e.reportToken("", auth.HashToken(tok))
		}),
	}
}

// tokenArg is the token given, or with "-" the first line of in.
func tokenArg(arg string, in io.Reader) (string, error) {
	if arg != "-" {
		return arg, nil
	}
	b, err := io.ReadAll(io.LimitReader(in, 64<<10))
	if err != nil {
		return "", fmt.Errorf("read the token from stdin: %w", err)
	}
	tok, _, _ := strings.Cut(string(b), "\n")
	tok = strings.TrimSuffix(tok, "\r")
	if tok == "" {
		return "", usagef("no token on stdin")
	}
	return tok, nil
}

func authCheckCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "check FILE",
		Short: "Check an auth file: it parses and every user is valid (exit 1 if not)",
		Long: `Parse the auth file FILE as a node would and report OK with its number of
users, or the first error (exit status 1): TOML syntax, unknown keys, a
user without a name or credential, a token_sha256 that is not 64 hex
digits, a credential shared by two users, a bad topic or group pattern.
Warns when the file can be read by other users (it holds the node token
and secret keys: chmod 600). With --json: {"file","ok","users","error"}.`,
		Args: positional(1, 1, "auth check FILE"),
		RunE: e.action(func(e *env, _ *cobra.Command, args []string) error { return authCheck(e, args[0]) }),
	}
}

// checkJSON is what `auth check --json` prints.
type checkJSON struct {
	File      string `json:"file"`
	OK        bool   `json:"ok"`
	Users     int    `json:"users"`
	NodeToken bool   `json:"nodeToken"`
	Error     string `json:"error,omitempty"`
}

func authCheck(e *env, path string) error {
	f, err := parseAuthFile(path)
	res := checkJSON{File: path, OK: err == nil}
	if err != nil {
		res.Error = err.Error()
	} else {
		res.Users, res.NodeToken = len(f.Users), f.NodeToken != ""
		if auth.ReadableByOthers(path) {
			fmt.Fprintf(e.stderr, "raftmq: warning: %s can be read by other users; it holds secrets (chmod 600 %s)\n", path, path)
		}
	}
	if e.json {
		return errors.Join(e.emit(res), err)
	}
	if err != nil {
		return err
	}
	node := "not set"
	if res.NodeToken {
		node = "set"
	}
	fmt.Fprintf(e.stdout, "%s: OK (%d users, node_token %s)\n", path, res.Users, node)
	return nil
}

func parseAuthFile(path string) (auth.File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return auth.File{}, err
	}
	f, err := auth.Parse(string(b))
	if err != nil {
		return f, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}
