package store

import (
	"github.com/raftmq/raftmq/consumequeue"
	"github.com/raftmq/raftmq/index"
	"github.com/raftmq/raftmq/meta"
	"github.com/raftmq/raftmq/recovery"
)

// recoveryTarget is the store's derived state as recovery replays into it
// (recovery.Target). Recovery runs inside Open, before any reader.
type recoveryTarget struct{ s *Store }

var _ recovery.Target = recoveryTarget{}

func (t recoveryTarget) Meta() *meta.Meta                   { return t.s.meta }
func (t recoveryTarget) DefaultQueues() int32               { return t.s.cfg.DefaultQueues }
func (t recoveryTarget) ConsumeQueues() *consumequeue.Store { return t.s.cqs }
func (t recoveryTarget) Index() *index.Service              { return t.s.idx }

// replay returns the replay of the store's commitlog into its derived state.
func (s *Store) replay() *recovery.Replay {
	return &recovery.Replay{Log: s.log, Logger: s.logger, Target: recoveryTarget{s}}
}
