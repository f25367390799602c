package transport

import (
	"sync"
	"sync/atomic"
)

// Stats are the server's counters (node exports them to Prometheus).
type Stats struct {
	// PulledByTopic is how many messages Pull answered, per topic, since
	// the server started.
	PulledByTopic map[string]int64
}

// Stats returns the server's counters now.
func (s *Server) Stats() Stats { return Stats{PulledByTopic: s.pulled.snapshot()} }

// topicCounts counts per topic, safe for concurrent use.
type topicCounts struct{ m sync.Map } // topic → *atomic.Int64

func (c *topicCounts) add(topic string, n int) {
	if n == 0 {
		return
	}
	v, ok := c.m.Load(topic)
	if !ok {
		v, _ = c.m.LoadOrStore(topic, new(atomic.Int64))
	}
	v.(*atomic.Int64).Add(int64(n))
}

func (c *topicCounts) snapshot() map[string]int64 {
	out := map[string]int64{}
	c.m.Range(func(k, v any) bool {
		out[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return out
}
