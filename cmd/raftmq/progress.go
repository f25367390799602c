package main

import (
	"fmt"
	"sync"
	"time"
)

// Progress intervals: a terminal gets one status line rewritten in place
// every second; anything else (a log file, a CI job) gets a plain line
// every plainEvery, so a long run shows it is alive without flooding.
const (
	ttyEvery   = time.Second
	plainEvery = 10 * time.Second
)

// progress prints line() to stderr while a long operation runs.
type progress struct {
	stop chan struct{}
	wg   sync.WaitGroup
}

// startProgress starts printing line() to e.stderr (nothing with --quiet).
func startProgress(e *env, line func() string) *progress {
	every := plainEvery
	if isTerminal(e.stderr) {
		every = ttyEvery
	}
	return startProgressEvery(e, every, isTerminal(e.stderr), line)
}

func startProgressEvery(e *env, every time.Duration, tty bool, line func() string) *progress {
	p := &progress{stop: make(chan struct{})}
	if e.quiet {
		return p
	}
	w := e.stderr
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		start := time.Now()
		for {
			select {
			case <-p.stop:
				if tty {
					fmt.Fprint(w, "\r\033[K")
				}
				return
			case <-t.C:
				if tty {
					fmt.Fprintf(w, "\r\033[K%s", line())
				} else {
					fmt.Fprintf(w, "raftmq: %s (%s)\n", line(), time.Since(start).Round(time.Second))
				}
			}
		}
	}()
	return p
}

// Stop ends the progress line and waits for its goroutine.
func (p *progress) Stop() {
	close(p.stop)
	p.wg.Wait()
}
