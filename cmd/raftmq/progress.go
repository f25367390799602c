package main

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// progress prints a status line to a terminal once a second; on anything
// else it prints nothing.
type progress struct {
	stop chan struct{}
	wg   sync.WaitGroup
}

// startProgress starts printing line() to w if w is a terminal.
func startProgress(w io.Writer, line func() string) *progress {
	p := &progress{stop: make(chan struct{})}
	if !isTerminal(w) {
		return p
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				fmt.Fprint(w, "\r\033[K")
				return
			case <-t.C:
				fmt.Fprintf(w, "\r\033[K%s", line())
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
