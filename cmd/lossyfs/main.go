// Command lossyfs mounts a lossy FUSE file system (package
// internal/lossyfs) over a backing directory and takes power-loss commands
// on a control socket, for test harnesses that run the processes using the
// mount as separate processes.
//
//	lossyfs mount -backing DIR -mountpoint DIR -control SOCKET [flags]
//	lossyfs powerloss -control SOCKET [-seed N] [-torn] [-no-writeback]
//	lossyfs sync -control SOCKET
//
// mount prints "READY <mountpoint>" on stdout once the mount and the socket
// are up, and unmounts cleanly (everything durable) on SIGTERM or SIGINT.
// SIGUSR1 writes every goroutine's stack to stderr (to see which FUSE
// request a stuck client waits on).
// powerloss (kill the processes using the mount first) cuts the power,
// mounts again on the same mountpoint and prints the report as JSON.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/raftmq/raftmq/internal/lossyfs"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: lossyfs mount|powerloss|sync [flags] (-h for flags)")
		return 2
	}
	switch args[0] {
	case "mount":
		return mount(args[1:], stdout, stderr)
	case "powerloss", "sync":
		return control(args[0], args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "lossyfs: unknown command %q (mount, powerloss, sync)\n", args[0])
		return 2
	}
}

func mount(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("lossyfs mount", flag.ContinueOnError)
	fl.SetOutput(stderr)
	backing := fl.String("backing", "", "backing directory: the durable state (required)")
	mountpoint := fl.String("mountpoint", "", "where to mount (required)")
	socket := fl.String("control", "", "control socket path (required)")
	entry := fl.Duration("entry-timeout", time.Second, "kernel cache time of names")
	attr := fl.Duration("attr-timeout", time.Second, "kernel cache time of attributes")
	lenient := fl.Bool("lenient-dirs", false, "fsync of a new directory also makes its name durable (ext4-like)")
	allowOther := fl.Bool("allow-other", false, "let other users use the mount")
	debug := fl.Bool("debug", false, "log every FUSE request")
	level := fl.String("log-level", "info", "log level")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	if *backing == "" || *mountpoint == "" || *socket == "" {
		fmt.Fprintln(stderr, "lossyfs mount: -backing, -mountpoint and -control are required")
		return 2
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "lossyfs", Output: stderr, Level: hclog.LevelFromString(*level)})
	d, err := lossyfs.StartDaemon(*backing, *mountpoint, *socket, lossyfs.Options{
		EntryTimeout: *entry, AttrTimeout: *attr, LenientDirs: *lenient,
		AllowOther: *allowOther, Debug: *debug, Logger: log,
	})
	if err != nil {
		fmt.Fprintln(stderr, "lossyfs:", err)
		return 1
	}
	fmt.Fprintf(stdout, "READY %s\n", *mountpoint)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	dump := make(chan os.Signal, 1)
	signal.Notify(dump, syscall.SIGUSR1)
	defer signal.Stop(dump)
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-dump:
			fmt.Fprintf(stderr, "=== lossyfs %s goroutines\n", time.Now().Format(time.RFC3339Nano))
			_ = pprof.Lookup("goroutine").WriteTo(stderr, 2)
		}
	}
	if err := d.Close(); err != nil {
		fmt.Fprintln(stderr, "lossyfs:", err)
		return 1
	}
	return 0
}

func control(op string, args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("lossyfs "+op, flag.ContinueOnError)
	fl.SetOutput(stderr)
	socket := fl.String("control", "", "control socket of a running lossyfs mount (required)")
	seed := fl.Int64("seed", 0, "seed of the torn write-back")
	torn := fl.Bool("torn", false, "persist a seeded random part of the unsynced pages, torn at 512-byte sectors")
	noWB := fl.Bool("no-writeback", false, "do not push the kernel's dirty pages into lossyfs first")
	timeout := fl.Duration("timeout", 2*time.Minute, "give up after")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	if *socket == "" {
		fmt.Fprintf(stderr, "lossyfs %s: -control is required\n", op)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	resp, err := lossyfs.Control(ctx, *socket, lossyfs.Request{Op: op, Seed: *seed, Torn: *torn, NoWriteback: *noWB})
	if err != nil {
		fmt.Fprintln(stderr, "lossyfs:", err)
		return 1
	}
	if err := json.NewEncoder(stdout).Encode(resp); err != nil {
		fmt.Fprintln(stderr, "lossyfs:", err)
		return 1
	}
	return 0
}
