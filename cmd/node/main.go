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
	if err := n.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "raftmq-node:", err)
		return 1
	}
	return 0
}
