package node

import (
	"context"
	"time"

	"github.com/raftmq/raftmq/fsm"
	"github.com/raftmq/raftmq/store"
)

// Delayed delivery's driver. While this node leads, the scheduler knows the
// earliest due time of a pending scheduled message (store.NextDue, kept
// current with store.TakeNewDue as messages are scheduled) and sleeps until
// then; when the clock passes it, it proposes a DeliverDue entry stamped
// with the clock, and every replica delivers what is due by that time
// (store.DeliverDue). Nothing runs per message: a million pending messages
// cost one timer. The store itself decides what is due, so a proposal from
// a stale view delivers nothing wrong (at worst nothing), and a new leader
// picks up where the old one stopped.

// schedulerIdle bounds a wait with nothing due, so a store swapped by a
// snapshot install (whose change channel is new) is looked at again.
const schedulerIdle = 30 * time.Second

// schedulerRetry is the pause after a failed proposal.
const schedulerRetry = 100 * time.Millisecond

// scheduleLoop is the scheduler goroutine (see above); it ends with the node.
func (n *Node) scheduleLoop() {
	var (
		st        *store.Store
		next      int64
		have      bool
		needScan  = true
		lastUpTo  int64
		lastReady = false
	)
	for {
		if !n.isReady.Load() {
			lastReady = false
			if !n.waitLeading() {
				return
			}
			continue
		}
		if !lastReady || st != n.Store() { // elected, or a snapshot swapped the store
			st, needScan, lastReady = n.Store(), true, true
		}
		changed := st.ScheduleChanged()
		if up := st.TimerUpTo(); up != lastUpTo {
			lastUpTo, needScan = up, true
		}
		if d, ok := st.TakeNewDue(); ok && (!have || d < next) {
			next, have = d, true
		}
		if needScan {
			var err error
			next, have, err = st.NextDue()
			if err != nil {
				n.log.Error("scheduler: reading the schedule queues failed", "error", err)
				if !n.pause(time.Second) {
					return
				}
				continue
			}
			needScan = false
		}
		now := n.now()
		if have && next <= now.UnixMilli() {
			if !n.deliverDue(now) && !n.pause(schedulerRetry) {
				return
			}
			needScan = true
			continue
		}
		wait := schedulerIdle
		if have {
			wait = min(wait, time.Duration(next-now.UnixMilli())*time.Millisecond)
		}
		t := time.NewTimer(wait)
		select {
		case <-n.stop:
			t.Stop()
			return
		case <-changed:
		case <-t.C:
		}
		t.Stop()
	}
}

// deliverDue proposes one DeliverDue entry stamped now and reports whether
// it applied.
func (n *Node) deliverDue(now time.Time) bool {
	cmd := fsm.Command{Type: fsm.CmdDeliverDue, LeaderTimestamp: now.UnixMilli(), LeaderHost: n.host}
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
	defer cancel()
	resp, err := n.applyCommand(ctx, &cmd)
	if err != nil {
		n.log.Warn("scheduler: delivering due messages failed; trying again", "error", err)
		return false
	}
	if resp.Delivered > 0 {
		n.log.Debug("scheduler: delivered due messages", "count", resp.Delivered)
	}
	return true
}

// waitLeading waits until this node leads and passed its barrier; false
// when the node stops.
func (n *Node) waitLeading() bool {
	n.readyMu.Lock()
	ch := n.ready
	n.readyMu.Unlock()
	select {
	case <-ch:
		return true
	case <-n.stop:
		return false
	}
}

// pause waits d; false when the node stops.
func (n *Node) pause(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-n.stop:
		return false
	}
}

// now is the node's clock (Config.Clock, or the system's).
func (n *Node) now() time.Time {
	if n.cfg.Clock != nil {
		return n.cfg.Clock()
	}
	return time.Now()
}
