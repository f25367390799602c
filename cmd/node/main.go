// Command raftmq-node runs one raftmq cluster member. With no flags it starts
// a single-node cluster in ./data on the default ports. Build it under its
// name: go build -o bin/raftmq-node ./cmd/node. --version prints the build.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/raftmq/raftmq/internal/buildinfo"
	"github.com/raftmq/raftmq/node"
)

func main() { os.Exit(run()) }

func run() int {
	for _, a := range os.Args[1:] {
		if a == "--version" || a == "-version" {
			fmt.Println(buildinfo.String("raftmq-node"))
			return 0
		}
	}
	cfg, err := node.Load(os.Args[1:], os.Getenv, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "raftmq-node:", err)
		return 2
	}
	n, err := node.New(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "raftmq-node:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	reloadOnHangup(ctx, n)
	if err := n.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "raftmq-node:", err)
		return 1
	}
	return 0
}

// reloadOnHangup reloads the TLS files and the auth file on each SIGHUP
// until ctx ends (the node logs the outcome; a failed reload keeps the old).
func reloadOnHangup(ctx context.Context, n *node.Node) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				_ = n.Reload()
			}
		}
	}()
}
