package consumequeue

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"sync"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/vfs"
)

type queueKey struct {
	topic string
	id    int32
}

// Store holds every consume queue under one root directory.
type Store struct {
	fs  vfs.FS
	cfg Config

	mu     sync.RWMutex
	queues map[queueKey]*Queue
	closed bool
}

// Open loads (and recovers) every queue under cfg.Dir, creating the
// directory if needed.
func Open(fs vfs.FS, cfg Config) (*Store, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := fs.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("consumequeue: mkdir %s: %w", cfg.Dir, err)
	}
	s := &Store{fs: fs, cfg: cfg, queues: make(map[queueKey]*Queue)}
	if err := s.load(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// load opens every <topic>/<queueId> directory.
func (s *Store) load() error {
	topics, err := s.fs.List(s.cfg.Dir)
	if err != nil {
		return fmt.Errorf("consumequeue: list %s: %w", s.cfg.Dir, err)
	}
	for _, topic := range topics {
		if err := s.loadTopic(topic); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) loadTopic(topic string) error {
	dir := filepath.Join(s.cfg.Dir, topic)
	if !s.isDir(dir) {
		s.cfg.Logger.Warn("ignoring non-directory in consume queue root", "path", dir)
		return nil
	}
	if err := ValidateTopic(topic); err != nil {
		return fmt.Errorf("consumequeue: %s: %w", dir, err)
	}
	names, err := s.fs.List(dir)
	if err != nil {
		return fmt.Errorf("consumequeue: list %s: %w", dir, err)
	}
	for _, name := range names {
		id, err := strconv.ParseInt(name, 10, 32)
		if err != nil || id < 0 || strconv.FormatInt(id, 10) != name || !s.isDir(filepath.Join(dir, name)) {
			s.cfg.Logger.Warn("ignoring unexpected entry in topic directory", "path", filepath.Join(dir, name))
			continue
		}
		var durable int64
		if s.cfg.Durable != nil {
			durable = s.cfg.Durable(topic, int32(id))
		}
		q, err := openQueue(s.fs, filepath.Join(dir, name), topic, int32(id), s.cfg.FileSize, durableUnits{durable, s.cfg.DurableBelow}, s.cfg.Logger)
		if err != nil {
			return err
		}
		s.queues[queueKey{topic, int32(id)}] = q
	}
	return nil
}

func (s *Store) isDir(path string) bool {
	fi, err := s.fs.Stat(path)
	return err == nil && fi.IsDir()
}

// ValidateTopic applies message.ValidateTopic, which also makes the name
// safe as one directory name, reporting a bad name as ErrTopic.
func ValidateTopic(topic string) error {
	if err := message.ValidateTopic(topic); err != nil {
		return fmt.Errorf("%w: %w", ErrTopic, err)
	}
	return nil
}

func validate(topic string, queueID int32) error {
	if err := ValidateTopic(topic); err != nil {
		return err
	}
	if queueID < 0 {
		return fmt.Errorf("%w: %d", ErrQueueID, queueID)
	}
	return nil
}

// Get returns the queue, or nil if it does not exist.
func (s *Store) Get(topic string, queueID int32) *Queue {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.queues[queueKey{topic, queueID}]
}

// GetOrCreate returns the queue, creating it (empty) if needed.
func (s *Store) GetOrCreate(topic string, queueID int32) (*Queue, error) {
	if err := validate(topic, queueID); err != nil {
		return nil, err
	}
	if q := s.Get(topic, queueID); q != nil {
		return q, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	k := queueKey{topic, queueID}
	if q := s.queues[k]; q != nil {
		return q, nil
	}
	dir := filepath.Join(s.cfg.Dir, topic, strconv.Itoa(int(queueID)))
	q, err := openQueue(s.fs, dir, topic, queueID, s.cfg.FileSize, durableUnits{}, s.cfg.Logger)
	if err != nil {
		return nil, err
	}
	s.queues[k] = q
	return q, nil
}

// Queues returns every queue, sorted by topic then queue id.
func (s *Store) Queues() []*Queue {
	s.mu.RLock()
	qs := make([]*Queue, 0, len(s.queues))
	for _, q := range s.queues {
		qs = append(qs, q)
	}
	s.mu.RUnlock()
	sort.Slice(qs, func(i, j int) bool {
		if qs[i].topic != qs[j].topic {
			return qs[i].topic < qs[j].topic
		}
		return qs[i].id < qs[j].id
	})
	return qs
}

// DeleteTopic closes every queue of topic and removes its directory.
func (s *Store) DeleteTopic(topic string) error {
	if err := ValidateTopic(topic); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	var errs []error
	for k, q := range s.queues {
		if k.topic == topic {
			errs = append(errs, q.close())
			delete(s.queues, k)
		}
	}
	if err := s.fs.RemoveAll(filepath.Join(s.cfg.Dir, topic)); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("consumequeue: delete topic %s: %w", topic, err)
	}
	return nil
}

// Flush flushes every queue and returns the first error.
func (s *Store) Flush() error {
	var first error
	for _, q := range s.Queues() {
		if err := q.Flush(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// MaxPhyOffset is the largest MaxPhyOffset over all queues (0 if none): the
// commitlog offset up to which dispatch has built consume queues.
func (s *Store) MaxPhyOffset() int64 {
	var m int64
	for _, q := range s.Queues() {
		m = max(m, q.MaxPhyOffset())
	}
	return m
}

// Close closes every queue. It does not flush.
func (s *Store) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	for k, q := range s.queues {
		if err := q.close(); err != nil {
			s.cfg.Logger.Error("closing consume queue", "topic", k.topic, "queue", k.id, "error", err)
		}
	}
}
