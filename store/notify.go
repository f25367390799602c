package store

import "github.com/raftmq/raftmq/meta"

import "sync"

// notifier wakes readers waiting for a queue to grow. Each queue has a
// channel that is closed (and replaced) when the queue grows.
type notifier struct {
	mu     sync.Mutex
	chans  map[meta.QueueKey]chan struct{}
	closed bool
}

func newNotifier() *notifier { return &notifier{chans: map[meta.QueueKey]chan struct{}{}} }

// channel returns the channel closed on the next growth of k. Take it before
// checking the queue, so a growth between check and wait is not missed.
func (n *notifier) channel(k meta.QueueKey) <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		c := make(chan struct{})
		close(c)
		return c
	}
	c, ok := n.chans[k]
	if !ok {
		c = make(chan struct{})
		n.chans[k] = c
	}
	return c
}

func (n *notifier) wake(k meta.QueueKey) {
	n.mu.Lock()
	if c, ok := n.chans[k]; ok {
		close(c)
		delete(n.chans, k)
	}
	n.mu.Unlock()
}

func (n *notifier) closeAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	for k, c := range n.chans {
		close(c)
		delete(n.chans, k)
	}
}
