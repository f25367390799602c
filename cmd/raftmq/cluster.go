package main

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/raftmq/raftmq/client"
)

// errNoLeader: the cluster has no leader (cluster status exits 1, so it
// can serve as a healthcheck).
var errNoLeader = errors.New("the cluster has no leader")

func clusterCmd(e *env) *cobra.Command {
	status := &cobra.Command{
		Use:   "status",
		Short: "Show the leader and every member's state; exit 1 without a leader",
		Args:  positional(0, 0, "cluster status"),
		RunE: e.action(func(e *env, _ *cobra.Command, _ []string) error {
			return withClient(e, func(c *client.Client) error { return clusterStatus(e, c) })
		}),
	}
	join := &cobra.Command{
		Use:   "join ID RAFTADDR APIADDR",
		Short: "Add a node as a non-voter; it is promoted once caught up",
		Args:  positional(3, 3, "cluster join ID RAFTADDR APIADDR"),
		RunE: e.action(func(e *env, _ *cobra.Command, args []string) error {
			return withClient(e, func(c *client.Client) error {
				return done(e, c.Join(e.ctx, args[0], args[1], args[2]), "joined "+args[0])
			})
		}),
	}
	remove := &cobra.Command{
		Use:   "remove ID",
		Short: "Remove a member from the cluster",
		Args:  positional(1, 1, "cluster remove ID"),
		RunE: e.action(func(e *env, _ *cobra.Command, args []string) error {
			return withClient(e, func(c *client.Client) error {
				return done(e, c.Remove(e.ctx, args[0]), "removed "+args[0])
			})
		}),
	}
	transfer := &cobra.Command{
		Use:   "transfer [ID]",
		Short: "Move leadership to member ID (or to any other voter)",
		Args:  positional(0, 1, "cluster transfer [ID]"),
		RunE: e.action(func(e *env, _ *cobra.Command, args []string) error {
			id := ""
			if len(args) == 1 {
				id = args[0]
			}
			return withClient(e, func(c *client.Client) error { return clusterTransfer(e, c, id) })
		}),
	}
	return group("cluster", "Show and change the cluster's members and leader", status, join, remove, transfer)
}

func withClient(e *env, fn func(*client.Client) error) error {
	c, err := e.connect()
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(c)
}

func done(e *env, err error, msg string) error {
	if err != nil {
		return err
	}
	if e.json {
		return e.emit(map[string]any{"ok": true, "message": msg})
	}
	_, err = fmt.Fprintln(e.stdout, msg)
	return err
}

// memberRow is one member in `cluster status`: the leader's view of it and
// its own status; the table and --json have the same fields.
type memberRow struct {
	ID            string `json:"id"`
	Suffrage      string `json:"suffrage"`
	RaftAddr      string `json:"raftAddr"`
	APIAddr       string `json:"apiAddr"`
	Reachable     bool   `json:"reachable"`
	State         string `json:"state"`
	CommitIndex   uint64 `json:"commitIndex"`
	AppliedIndex  uint64 `json:"appliedIndex"`
	ConfirmOffset int64  `json:"confirmOffset"`
	MaxOffset     int64  `json:"maxOffset"`
	// DiskUsedPercent: the store disk's used share (0: unknown), 100 while
	// the node waits for space to apply an entry.
	DiskUsedPercent int `json:"diskUsedPercent"`
}

// clusterStatus prints the leader's view and every member's own status. It
// returns errNoLeader (exit 1) when no leader is known.
func clusterStatus(e *env, c *client.Client) error {
	st, err := c.Status(e.ctx)
	if err != nil {
		return err
	}
	rows := make([]memberRow, 0, len(st.Members))
	for _, m := range st.Members {
		r := memberRow{ID: m.ID, Suffrage: m.Suffrage, RaftAddr: m.RaftAddr, APIAddr: m.APIAddr, State: "unreachable"}
		if m.APIAddr != "" {
			if ms, err := c.StatusOf(e.ctx, m.APIAddr); err == nil {
				r.Reachable, r.State, r.CommitIndex, r.AppliedIndex = true, ms.State, ms.CommitIndex, ms.AppliedIndex
				r.ConfirmOffset, r.MaxOffset, r.DiskUsedPercent = ms.ConfirmOffset, ms.MaxOffset, ms.DiskUsedPercent
			}
		}
		rows = append(rows, r)
	}
	if e.json {
		out := statusJSON(st)
		out["members"] = rows
		out["hasLeader"] = st.HasLeader()
		if err := e.emit(out); err != nil {
			return err
		}
	} else {
		if st.HasLeader() {
			fmt.Fprintf(e.stdout, "leader %s (%s), term %d\n", st.LeaderID, st.LeaderAPIAddr, st.Term)
		} else {
			fmt.Fprintf(e.stdout, "no leader (asked %s, %s), term %d\n", st.ID, st.State, st.Term)
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tSUFFRAGE\tRAFT\tAPI\tSTATE\tCOMMIT\tAPPLIED\tCONFIRM\tMAX\tDISK")
		for _, r := range rows {
			if !r.Reachable {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\tunreachable\t-\t-\t-\t-\t-\n", r.ID, r.Suffrage, r.RaftAddr, r.APIAddr)
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\n", r.ID, r.Suffrage, r.RaftAddr, r.APIAddr,
				r.State, r.CommitIndex, r.AppliedIndex, r.ConfirmOffset, r.MaxOffset, diskColumn(r.DiskUsedPercent))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if !st.HasLeader() {
		return fmt.Errorf("%w (term %d, asked %s)", errNoLeader, st.Term, st.ID)
	}
	return nil
}

// diskColumn shows a used disk share, "-" when the node cannot tell.
func diskColumn(percent int) string {
	if percent <= 0 {
		return "-"
	}
	return fmt.Sprintf("%d%%", percent)
}

func statusJSON(s client.ClusterStatus) map[string]any {
	return map[string]any{"id": s.ID, "state": s.State, "leaderId": s.LeaderID,
		"leaderRaftAddr": s.LeaderRaftAddr, "leaderApiAddr": s.LeaderAPIAddr, "term": s.Term,
		"commitIndex": s.CommitIndex, "appliedIndex": s.AppliedIndex, "confirmOffset": s.ConfirmOffset,
		"minOffset": s.MinOffset, "maxOffset": s.MaxOffset}
}

// transferWait bounds how long transfer waits to see the new leader.
const transferWait = 15 * time.Second

// clusterTransfer moves leadership to id (or any voter) and names the old
// and the new leader. When id already leads it says so and changes nothing.
func clusterTransfer(e *env, c *client.Client, id string) error {
	before, err := c.Status(e.ctx)
	if err != nil {
		return err
	}
	if !before.HasLeader() {
		return fmt.Errorf("cannot transfer: %w (term %d)", errNoLeader, before.Term)
	}
	old := before.LeaderID
	if id != "" && id == old {
		return transferred(e, old, old, before.Term, true)
	}
	if err := c.Transfer(e.ctx, id); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(e.ctx, transferWait)
	defer cancel()
	for {
		st, err := c.Status(ctx)
		if err == nil && st.HasLeader() && st.LeaderID != old {
			if id != "" && st.LeaderID != id {
				return fmt.Errorf("leadership moved from %s to %s, not to %s", old, st.LeaderID, id)
			}
			return transferred(e, old, st.LeaderID, st.Term, false)
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("transfer accepted, but %s still leads after %v: %w", old, transferWait, ctx.Err())
		case <-t.C:
		}
	}
}

func transferred(e *env, from, to string, term uint64, already bool) error {
	if e.json {
		return e.emit(map[string]any{"ok": true, "from": from, "to": to, "term": term, "alreadyLeader": already})
	}
	if already {
		_, err := fmt.Fprintf(e.stdout, "%s already leads (term %d); nothing to transfer\n", to, term)
		return err
	}
	_, err := fmt.Fprintf(e.stdout, "leadership transferred from %s to %s (term %d)\n", from, to, term)
	return err
}
