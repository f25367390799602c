package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/raftmq/raftmq/client"
)

// groupBeat is how often a group member beats (the leader drops a member
// after 10 s of silence).
const groupBeat = 2 * time.Second

// queueRun is one queue being consumed by a member.
type queueRun struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// memberID names this consumer in its group: host, pid and a random part.
func memberID() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s@%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// asMember consumes as a member of the group: it beats every groupBeat,
// consumes the queues the live members' averaging gives it and hands over
// the others, until -n, --to-end (every queue it holds read to its end),
// an error or the end of the command; it leaves the group on the way out.
func (k *consumer) asMember(queues []int32) error {
	id := memberID()
	running := map[int32]*queueRun{}
	finished := make(chan int32, len(queues))
	stop := func(q int32) error {
		r := running[q]
		r.cancel()
		<-r.done
		delete(running, q)
		return r.err
	}
	defer func() {
		for q := range running {
			_ = stop(q)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = k.c.LeaveGroup(ctx, k.f.group, id)
	}()
	tick := time.NewTicker(groupBeat)
	defer tick.Stop()
	var mine []int32
	for {
		members, _, err := k.c.JoinGroup(k.e.ctx, k.f.group, id)
		if err != nil {
			if k.e.ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("group %s heartbeat: %w", k.f.group, err)
		}
		if next := client.AllocateAveragely(queues, members, id); !slices.Equal(next, mine) {
			if err := k.rebalance(running, next, finished, stop); err != nil {
				return err
			}
			k.e.notef("group %s: %d members, this one (%s) holds queues %v", k.f.group, len(members), id, next)
			mine = next
		}
		if k.f.toEnd && allFinished(running, mine) {
			return firstError(running)
		}
		select {
		case <-tick.C:
		case <-finished:
			if err := firstError(running); err != nil {
				return err
			}
			if k.f.toEnd && allFinished(running, mine) {
				return nil
			}
		case <-k.done:
			return nil
		case <-k.e.ctx.Done():
			return nil
		}
	}
}

// rebalance stops the queues not in next and starts those newly in it.
func (k *consumer) rebalance(running map[int32]*queueRun, next []int32, finished chan int32, stop func(int32) error) error {
	for q := range running {
		if !slices.Contains(next, q) {
			if err := stop(q); err != nil {
				return err
			}
		}
	}
	for _, q := range next {
		if running[q] != nil {
			continue
		}
		ctx, cancel := context.WithCancel(k.e.ctx)
		r := &queueRun{cancel: cancel, done: make(chan struct{})}
		running[q] = r
		go func() {
			defer close(r.done)
			r.err = k.queue(ctx, q)
			finished <- q
		}()
	}
	return nil
}

// allFinished reports whether every queue in mine has stopped on its own.
func allFinished(running map[int32]*queueRun, mine []int32) bool {
	for _, q := range mine {
		select {
		case <-running[q].done:
		default:
			return false
		}
	}
	return true
}

// firstError is the error of a queue that stopped with one.
func firstError(running map[int32]*queueRun) error {
	var errs []error
	for _, r := range running {
		select {
		case <-r.done:
			errs = append(errs, r.err)
		default:
		}
	}
	return errors.Join(errs...)
}

// notef prints a line about what the command does to stderr (nothing with
// --quiet).
func (e *env) notef(format string, args ...any) {
	if !e.quiet {
		fmt.Fprintf(e.stderr, format+"\n", args...)
	}
}
