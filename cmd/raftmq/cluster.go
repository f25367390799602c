package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/raftmq/raftmq/client"
)

func runCluster(e *env, g *globals, args []string) error {
	if len(args) == 0 {
		return usagef("usage: cluster status | join ID RAFTADDR APIADDR | remove ID | transfer [ID]")
	}
	fs := newFlagSet("cluster "+args[0], e.stderr)
	pos, err := parse(e, g, fs, args[1:])
	if err != nil {
		return err
	}
	var check error
	switch args[0] {
	case "status":
		check = requireArgs(pos, 0, 0, "cluster status")
	case "join":
		check = requireArgs(pos, 3, 3, "cluster join ID RAFTADDR APIADDR")
	case "remove":
		check = requireArgs(pos, 1, 1, "cluster remove ID")
	case "transfer":
		check = requireArgs(pos, 0, 1, "cluster transfer [ID]")
	default:
		check = usagef("unknown cluster command %q", args[0])
	}
	if check != nil {
		return check
	}
	c, err := e.connect()
	if err != nil {
		return err
	}
	defer c.Close()
	switch args[0] {
	case "status":
		return clusterStatus(e, c)
	case "join":
		return done(e, c.Join(e.ctx, pos[0], pos[1], pos[2]), "joined "+pos[0])
	case "remove":
		return done(e, c.Remove(e.ctx, pos[0]), "removed "+pos[0])
	}
	id := ""
	if len(pos) == 1 {
		id = pos[0]
	}
	return done(e, c.Transfer(e.ctx, id), "leadership transferred")
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

// clusterStatus prints the leader's view and every member's own status.
func clusterStatus(e *env, c *client.Client) error {
	st, err := c.Status(e.ctx)
	if err != nil {
		return err
	}
	if e.json {
		return e.emit(statusJSON(st))
	}
	fmt.Fprintf(e.stdout, "leader %s (%s), term %d\n", st.LeaderID, st.LeaderAPIAddr, st.Term)
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSUFFRAGE\tRAFT\tAPI\tSTATE\tCOMMIT\tAPPLIED\tCONFIRM\tMAX")
	for _, m := range st.Members {
		ms, err := c.StatusOf(e.ctx, m.APIAddr)
		if err != nil || m.APIAddr == "" {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\tunreachable\t-\t-\t-\t-\n", m.ID, m.Suffrage, m.RaftAddr, m.APIAddr)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\n", m.ID, m.Suffrage, m.RaftAddr, m.APIAddr,
			ms.State, ms.CommitIndex, ms.AppliedIndex, ms.ConfirmOffset, ms.MaxOffset)
	}
	return tw.Flush()
}

func statusJSON(s client.ClusterStatus) map[string]any {
	members := make([]map[string]any, 0, len(s.Members))
	for _, m := range s.Members {
		members = append(members, map[string]any{"id": m.ID, "raftAddr": m.RaftAddr, "apiAddr": m.APIAddr, "suffrage": m.Suffrage})
	}
	return map[string]any{"id": s.ID, "state": s.State, "leaderId": s.LeaderID,
		"leaderRaftAddr": s.LeaderRaftAddr, "leaderApiAddr": s.LeaderAPIAddr, "term": s.Term,
		"commitIndex": s.CommitIndex, "appliedIndex": s.AppliedIndex, "confirmOffset": s.ConfirmOffset,
		"minOffset": s.MinOffset, "maxOffset": s.MaxOffset, "members": members}
}
