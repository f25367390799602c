package mmap

import (
	"errors"
	"fmt"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/raftmq/raftmq/vfs"
)

// Allocator prepares files ahead of need in one background goroutine.
//
// Get(name, size, next...) hands out name and queues next, so while the
// caller fills name the goroutine creates, preallocates, maps and (with
// PreTouch) pre-faults the next files. Requests are served in order.
type Allocator struct {
	fs   vfs.FS
	opts AllocatorOptions
	log  hclog.Logger

	mu      sync.Mutex
	reqs    map[string]*allocReq // requested, not yet taken by Get
	pending []*allocReq          // not yet started by the goroutine
	closed  bool

	wake chan struct{} // cap 1: pending grew
	quit chan struct{}
	wg   sync.WaitGroup
}

// allocReq is one file to prepare; file and err are set before done closes.
type allocReq struct {
	name string
	size int64
	done chan struct{}
	file File
	err  error

	abort     chan struct{} // closed by cancel: stop pre-touching
	abortOnce sync.Once
}

// cancel ends the request's pre-touch early: a writer is waiting for the
// file (it faults in the rest itself, as without pre-touch), or the
// allocator is closing. The file stays whole and valid.
func (r *allocReq) cancel() { r.abortOnce.Do(func() { close(r.abort) }) }

// NewAllocator starts the allocator goroutine; Close stops and waits for it.
func NewAllocator(fs vfs.FS, opts AllocatorOptions) *Allocator {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	a := &Allocator{
		fs:   fs,
		opts: opts,
		log:  opts.Logger,
		reqs: make(map[string]*allocReq),
		wake: make(chan struct{}, 1),
		quit: make(chan struct{}),
	}
	a.wg.Add(1)
	go a.run()
	return a
}

// Get returns the file name of the given size, prepared in the background if
// it was requested before (waiting for it if still in progress), created
// synchronously otherwise; it then queues each of next (but "") for
// preparation, in order.
func (a *Allocator) Get(name string, size int64, next ...string) (File, error) {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil, fmt.Errorf("%w: allocator", ErrClosed)
	}
	r := a.reqs[name]
	delete(a.reqs, name)
	a.mu.Unlock()

	f, err := a.take(r, name, size)
	if err != nil {
		return nil, err
	}
	for _, n := range next {
		if n != "" {
			a.request(n, size)
		}
	}
	return f, nil
}

// take waits for a prepared request, falling back to creating the file
// synchronously when there was none or it failed.
func (a *Allocator) take(r *allocReq, name string, size int64) (File, error) {
	if r != nil {
		r.cancel() // needed now: a half-touched file beats waiting for the rest
		<-r.done
		if errors.Is(r.err, ErrClosed) {
			return nil, r.err
		}
		if r.err == nil && r.size == size {
			return r.file, nil
		}
		if r.file != nil {
			r.file.Close()
		}
		a.log.Warn("prepared file unusable, creating it now", "path", name, "error", r.err)
	}
	// The caller is waiting: no pre-touch here, the first writes fault the
	// pages in (pre-touching 1 GiB inline stalled a fresh store's first
	// write for seconds).
	return Open(a.fs, name, size, Options{})
}

// request queues name for preparation unless it already is.
func (a *Allocator) request(name string, size int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed || a.reqs[name] != nil {
		return
	}
	r := &allocReq{name: name, size: size, done: make(chan struct{}), abort: make(chan struct{})}
	a.reqs[name] = r
	a.pending = append(a.pending, r)
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

func (a *Allocator) run() {
	defer a.wg.Done()
	for {
		r := a.next()
		if r == nil {
			select {
			case <-a.wake:
				continue
			case <-a.quit:
				return
			}
		}
		r.file, r.err = Open(a.fs, r.name, r.size, Options{PreTouch: a.opts.PreTouch, Abort: r.abort})
		if r.err != nil {
			a.log.Error("preparing file failed", "path", r.name, "error", r.err)
		}
		close(r.done)
		select {
		case <-a.quit:
			return
		default:
		}
	}
}

// next pops the oldest pending request, or nil.
func (a *Allocator) next() *allocReq {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.pending) == 0 {
		return nil
	}
	r := a.pending[0]
	a.pending = a.pending[1:]
	return r
}

// Close stops the goroutine, closes and deletes prepared files nobody took.
// A Get waiting on a request the goroutine never started gets ErrClosed.
func (a *Allocator) Close() error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return fmt.Errorf("%w: allocator", ErrClosed)
	}
	a.closed = true
	for _, r := range a.reqs {
		r.cancel()
	}
	a.mu.Unlock()
	close(a.quit)
	a.wg.Wait()

	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range a.pending {
		r.err = fmt.Errorf("%w: allocator", ErrClosed)
		close(r.done)
	}
	a.pending = nil
	var first error
	for name, r := range a.reqs {
		delete(a.reqs, name)
		if r.file == nil {
			continue
		}
		if err := a.discard(r.file); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (a *Allocator) discard(f File) error {
	name := f.Name()
	if err := f.Close(); err != nil {
		return err
	}
	a.log.Debug("deleting unused prepared file", "path", name)
	if err := a.fs.Remove(name); err != nil {
		return fmt.Errorf("mmap: delete %s: %w", name, err)
	}
	return nil
}

// waitIdle blocks until every queued request has been prepared (tests and
// benchmarks).
func (a *Allocator) waitIdle() {
	a.mu.Lock()
	var reqs []*allocReq
	for _, r := range a.reqs {
		reqs = append(reqs, r)
	}
	a.mu.Unlock()
	for _, r := range reqs {
		<-r.done
	}
}
