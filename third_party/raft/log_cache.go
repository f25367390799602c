// Copyright IBM Corp. 2013, 2025
// SPDX-License-Identifier: MPL-2.0

package raft

import (
	"fmt"
	"sync"
)

// LogCache wraps any LogStore implementation to provide an
// in-memory ring buffer. This is used to cache access to
// the recently written entries. For implementations that do not
// cache themselves, this can provide a substantial boost by
// avoiding disk I/O on recent entries.
type LogCache struct {
	store LogStore

	cache []*Log
	l     sync.RWMutex
}

// NewLogCache is used to create a new LogCache with the
// given capacity and backend store.
func NewLogCache(capacity int, store LogStore) (*LogCache, error) {
	if capacity <= 0 {
		return nil, fmt.Errorf("capacity must be positive")
	}
	c := &LogCache{
		store: store,
		cache: make([]*Log, capacity),
	}
	return c, nil
}

// IsMonotonic implements the MonotonicLogStore interface. This is a shim to
// expose the underlying store as monotonically indexed or not.
func (c *LogCache) IsMonotonic() bool {
	if store, ok := c.store.(MonotonicLogStore); ok {
		return store.IsMonotonic()
	}

	return false
}

func (c *LogCache) GetLog(idx uint64, log *Log) error {
	// Check the buffer for an entry
	c.l.RLock()
	cached := c.cache[idx%uint64(len(c.cache))]
	c.l.RUnlock()

	// Check if entry is valid
	if cached != nil && cached.Index == idx {
		*log = *cached
		return nil
	}

	// Forward request on cache miss
	return c.store.GetLog(idx, log)
}

// GetLogType is LogTypeReader's: from the cache, else from the store (its
// GetLogType if it has one, else its GetLog). raftmq fork.
func (c *LogCache) GetLogType(idx uint64) (LogType, error) {
	c.l.RLock()
	cached := c.cache[idx%uint64(len(c.cache))]
	c.l.RUnlock()
	if cached != nil && cached.Index == idx {
		return cached.Type, nil
	}
	return logType(c.store, idx)
}

func (c *LogCache) StoreLog(log *Log) error {
	return c.StoreLogs([]*Log{log})
}

func (c *LogCache) StoreLogs(logs []*Log) error {
	err := c.store.StoreLogs(logs)
	// Insert the logs into the ring buffer, but only on success
	if err != nil {
		return fmt.Errorf("unable to store logs within log store, err: %q", err)
	}
	c.l.Lock()
	for _, l := range logs {
		c.cache[l.Index%uint64(len(c.cache))] = l
	}
	c.l.Unlock()
	return nil
}

func (c *LogCache) FirstIndex() (uint64, error) {
	return c.store.FirstIndex()
}

func (c *LogCache) LastIndex() (uint64, error) {
	return c.store.LastIndex()
}

// DeleteRange invalidates the cached entries in [min, max] and deletes
// them from the store. raftmq fork: v1.8.0 cleared the whole cache, which
// also dropped entries staged for replication (stageLogs) and not yet in
// the store, when a compaction ran during the leader's write.
func (c *LogCache) DeleteRange(min, max uint64) error {
	c.l.Lock()
	for i, l := range c.cache {
		if l != nil && l.Index >= min && l.Index <= max {
			c.cache[i] = nil
		}
	}
	c.l.Unlock()

	return c.store.DeleteRange(min, max)
}

// stageLogs puts logs in the ring buffer before they are stored, so that
// replicators read them from it while the leader writes them (raftmq
// fork, Config.ReplicateWhileStoring). It stages nothing and reports false
// when they would not all fit at once.
func (c *LogCache) stageLogs(logs []*Log) bool {
	if len(logs) == 0 || len(logs) > len(c.cache) {
		return false
	}
	c.l.Lock()
	for _, l := range logs {
		c.cache[l.Index%uint64(len(c.cache))] = l
	}
	c.l.Unlock()
	return true
}

// unstageLogs removes staged logs whose write failed.
func (c *LogCache) unstageLogs(logs []*Log) {
	c.l.Lock()
	for _, l := range logs {
		slot := l.Index % uint64(len(c.cache))
		if c.cache[slot] == l {
			c.cache[slot] = nil
		}
	}
	c.l.Unlock()
}
