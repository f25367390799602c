package client

import (
	"sync"
	"testing"
	"time"
)

// TestProducerBoundsBatchBytes: a batch is cut before the message that
// would take it over MaxBatchBytes, a message larger than that goes alone,
// and every message is called back once.
func TestProducerBoundsBatchBytes(t *testing.T) {
	leader, _, lAddr, _ := cluster(t)
	c := newClient(t, lAddr)
	const budget = 1 << 20
	p := NewProducer(c, ProducerOptions{MaxBatch: 64, MaxBatchBytes: budget, Linger: 20 * time.Millisecond, MaxInFlight: 2})
	small := make([]byte, 300<<10) // three fit a batch, four do not
	big := make([]byte, 2<<20)     // larger than a batch: alone
	var mu sync.Mutex
	calls, failed := 0, 0
	cb := func(_ SendResult, err error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if err != nil {
			failed++
			t.Errorf("send: %v", err)
		}
	}
	const n = 40
	for i := range n {
		body := small
		if i%10 == 5 {
			body = big
		}
		p.SendAsync(NewMessage("T", body).WithQueue(0), cb)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if calls != n || failed != 0 {
		t.Fatalf("%d callbacks (%d failed) for %d messages", calls, failed, n)
	}
	leader.mu.Lock()
	defer leader.mu.Unlock()
	total, threes := 0, 0
	for _, b := range leader.batches {
		total += b
		if b > 3 {
			t.Fatalf("batch of %d messages of 300 KiB: over MaxBatchBytes %d (batches %v)", b, budget, leader.batches)
		}
		if b == 3 {
			threes++
		}
	}
	if total != n || threes == 0 {
		t.Fatalf("batches %v: %d messages, %d full batches", leader.batches, total, threes)
	}
}
