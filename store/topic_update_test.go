package store

import (
	"errors"
	"testing"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/vfs"
)

func TestUpdateTopic(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := smallConfig("/data/store")
	s := mustOpen(t, fsys, cfg)
	defer func() { _ = s.Close() }()
	if err := s.CreateTopic(header(1), TopicConfig{Name: "T", Queues: 4, Perm: 6}); err != nil {
		t.Fatal(err)
	}
	msg := message.Message{Topic: "T", QueueID: 6, BornTimestamp: 1, Body: []byte("q6")}
	if res, err := s.AppendMessages(header(2), []message.Message{msg}, nil); err != nil || !errors.Is(res[0].Err, ErrBadQueue) {
		t.Fatalf("queue 6 of a 4-queue topic: %v / %+v", err, res)
	}
	if err := s.UpdateTopic(header(3), TopicConfig{Name: "T", Queues: 8, Perm: 4}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Topic("T"); got != (TopicConfig{Name: "T", Queues: 8, Perm: 4}) {
		t.Fatalf("after update: %+v", got)
	}
	if res, err := s.AppendMessages(header(4), []message.Message{msg}, nil); err != nil || res[0].Err != nil {
		t.Fatalf("queue 6 after growing to 8: %v / %+v", err, res)
	}
	// Zero keeps: only the perm changes.
	if err := s.UpdateTopic(header(5), TopicConfig{Name: "T", Perm: 6}); err != nil {
		t.Fatal(err)
	}
	want := TopicConfig{Name: "T", Queues: 8, Perm: 6}
	if got, _ := s.Topic("T"); got != want {
		t.Fatalf("after perm-only update: %+v", got)
	}

	// Deterministic refusals write nothing.
	confirm := s.ConfirmOffset()
	for _, c := range []struct {
		t    TopicConfig
		want error
	}{
		{TopicConfig{Name: "T", Queues: 2}, ErrBadQueue},                 // shrink
		{TopicConfig{Name: "T", Queues: cfg.MaxQueues + 1}, ErrBadQueue}, // too many
		{TopicConfig{Name: "T", Perm: 16}, ErrBadCommand},
		{TopicConfig{Name: "nope", Queues: 8}, ErrNoSuchTopic},
	} {
		if err := s.UpdateTopic(header(6), c.t); !errors.Is(err, c.want) {
			t.Errorf("update %+v: %v, want %v", c.t, err, c.want)
		}
	}
	if s.ConfirmOffset() != confirm {
		t.Fatalf("a refused update wrote %d bytes", s.ConfirmOffset()-confirm)
	}
	if idx, _ := s.Applied(); idx != 5 {
		t.Fatalf("applied %d, want 5", idx)
	}

	// A clean reopen reads the topic from the checkpoint.
	must(t, s.Close())
	s2 := mustOpen(t, fsys, cfg)
	if got, _ := s2.Topic("T"); got != want {
		t.Fatalf("after clean reopen: %+v, want %+v", got, want)
	}
	must(t, s2.Close())
}

// Abnormal recovery rebuilds an updated topic from the command frames: crash
// the flush at every point; where the commitlog got synced but the
// checkpoint still predates the updates, recovery must replay them.
func TestUpdateTopicReplayedByRecovery(t *testing.T) {
	cfg := smallConfig("/data/store")
	want := TopicConfig{Name: "T", Queues: 8, Perm: 4}
	replayed := 0
	for k := 0; k < 200; k++ {
		fsys := vfs.NewMem()
		s := mustOpen(t, fsys, cfg)
		must(t, s.CreateTopic(header(1), TopicConfig{Name: "T", Queues: 4, Perm: 6}))
		must(t, s.Flush()) // checkpoint: 4 queues
		must(t, s.UpdateTopic(header(2), TopicConfig{Name: "T", Queues: 6}))
		must(t, s.UpdateTopic(header(3), TopicConfig{Name: "T", Queues: 8, Perm: 4}))
		fsys.CrashAt(k, vfs.CrashOptions{Mode: vfs.DropUnsynced})
		_ = s.Flush()
		clone, crashed := fsys.Crashed()
		_ = s.Close()
		if !crashed {
			break
		}
		s2 := mustOpen(t, clone, cfg)
		got, _ := s2.Topic("T")
		applied, _ := s2.Applied()
		plan := s2.RecoveryPlan()
		must(t, s2.Close())
		switch applied {
		case 1:
			if got.Queues != 4 {
				t.Fatalf("k=%d: applied 1 but %+v", k, got)
			}
		case 3:
			if got != want {
				t.Fatalf("k=%d: applied 3 but %+v, want %+v", k, got, want)
			}
			if plan.Checkpoint.AppliedIndex < 3 {
				replayed++ // the topic came from replaying the update frames
			}
		default:
			t.Fatalf("k=%d: applied %d", k, applied)
		}
	}
	if replayed == 0 {
		t.Fatal("no crash point left the updates only in the commitlog: replay not exercised")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
