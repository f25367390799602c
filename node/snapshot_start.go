package node

import (
	"errors"
	"fmt"
	"time"
)

// ErrStoreBehindSnapshot is returned by New when the store has applied less
// than the newest local snapshot and restoring that snapshot failed: the
// node refuses to start rather than serve (or vote with) a state that Raft
// believes it has but the store does not.
var ErrStoreBehindSnapshot = errors.New("node: store is behind the newest snapshot")

// restoreIfBehind makes the store hold at least what the newest local
// snapshot holds, before Raft starts.
//
// With NoSnapshotRestoreOnStart, hashicorp/raft takes the newest snapshot's
// index as applied without calling Restore, trusting that the store already
// holds it. That holds for snapshots this node took (Persist flushes the
// store up to the snapshot first), but not for one received from a leader
// whose Restore failed or was cut short by a crash: the snapshot is stored,
// the store is the old one, and Raft would go on applying later entries to
// it — a replica that silently diverges. So the store's applied index and
// term are compared with the ones the snapshot captured (not the snapshot's
// Raft index, which also counts configuration entries the store never
// sees), and a store behind it is restored from the snapshot here.
func (n *Node) restoreIfBehind() error {
	metas, err := n.snaps.List()
	if err != nil {
		return fmt.Errorf("node: list snapshots: %w", err)
	}
	if len(metas) == 0 {
		return nil
	}
	newest := metas[0]
	h, err := n.snaps.ReadHeader(newest.ID)
	if err != nil {
		return fmt.Errorf("%w: read snapshot %s: %w", ErrStoreBehindSnapshot, newest.ID, err)
	}
	idx, term := n.fsm.Store().Applied()
	want, wantTerm := h.Store.AppliedIndex, h.Store.AppliedTerm
	if idx > want || (idx == want && term == wantTerm) {
		return nil
	}
	n.log.Warn("store is behind the newest snapshot; restoring it before starting raft",
		"store_index", idx, "store_term", term, "snapshot", newest.ID,
		"snapshot_store_index", want, "snapshot_store_term", wantTerm)
	started := time.Now()
	_, rc, err := n.snaps.Open(newest.ID)
	if err != nil {
		return fmt.Errorf("%w: open snapshot %s: %w", ErrStoreBehindSnapshot, newest.ID, err)
	}
	if err := n.fsm.Restore(rc); err != nil {
		return fmt.Errorf("%w: restore snapshot %s: %w", ErrStoreBehindSnapshot, newest.ID, err)
	}
	if idx, term = n.fsm.Store().Applied(); idx != want || term != wantTerm {
		return fmt.Errorf("%w: restored snapshot %s left the store at index %d term %d, want %d term %d",
			ErrStoreBehindSnapshot, newest.ID, idx, term, want, wantTerm)
	}
	n.log.Info("store restored from the newest snapshot", "snapshot", newest.ID,
		"index", idx, "duration", time.Since(started))
	return nil
}
