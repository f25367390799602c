package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/raftmq/raftmq/client"
)

// membersLine is what group describe says about the group's live members
// (consume --group processes beating to the leader).
func membersLine(members []string, tracked bool) string {
	switch {
	case !tracked:
		return "not tracked by this cluster"
	case len(members) == 0:
		return "none live (no consume --group process is running)"
	}
	return strings.Join(members, ", ")
}

func groupCmd(e *env) *cobra.Command {
	list := &cobra.Command{
		Use:   "list",
		Short: "List consumer groups: name, topics, total lag",
		Args:  positional(0, 0, "group list"),
		RunE:  e.action(func(e *env, _ *cobra.Command, _ []string) error { return groupList(e) }),
	}
	var topic string
	describe := &cobra.Command{
		Use:   "describe G [-t T]",
		Short: "Show group G per queue: committed offset, max offset, lag",
		Long: `Show consumer group G's progress in every queue of the topics it has
committed offsets in (or of topic T): the committed offset ("-" if none),
the queue's min and max offset, and the lag, max - committed (max - min
where nothing is committed: what a consumer starting at the min offset
reads). The server does not track group members: consumers pull without
registering.`,
		Args: positional(1, 1, "group describe G [-t T]"),
		RunE: e.action(func(e *env, _ *cobra.Command, args []string) error { return groupDescribe(e, args[0], topic) }),
	}
	topicFlag(e, describe, &topic, "only this topic (every queue of it, committed or not)")
	return group("group", "List, describe and reset consumer groups", list, describe, groupResetCmd(e))
}

type resetFlags struct {
	topic, toTime string
	toOffset      int64
	earliest      bool
	latest        bool
}

func groupResetCmd(e *env) *cobra.Command {
	var f resetFlags
	const use = "reset G -t T --to-time RFC3339 | --to-offset N | --to-earliest | --to-latest"
	cmd := &cobra.Command{
		Use:   use,
		Short: "Move group G's committed offsets in every queue of topic T",
		Long: `Move consumer group G's committed offset in every queue of topic T, in
one commit through Raft (also backwards): to the first message stored at
or after a time, to offset N (clamped to each queue's [min, max]), to each
queue's min offset, or to its max offset (skip everything stored). Give
exactly one --to-* flag. Stop the group's consumers first: a running
consumer commits its own position and overwrites the reset.`,
		Args: positional(1, 1, "group "+use),
		RunE: e.action(func(e *env, cmd *cobra.Command, args []string) error {
			target, err := f.target(cmd)
			if err != nil {
				return err
			}
			return groupReset(e, args[0], f.topic, target)
		}),
	}
	fl := cmd.Flags()
	topicFlag(e, cmd, &f.topic, "topic (required)")
	fl.StringVar(&f.toTime, "to-time", "", "the first message stored at or after this RFC3339 time")
	fl.Int64Var(&f.toOffset, "to-offset", 0, "this offset in every queue (clamped to [min, max])")
	fl.BoolVar(&f.earliest, "to-earliest", false, "each queue's min offset")
	fl.BoolVar(&f.latest, "to-latest", false, "each queue's max offset")
	return cmd
}

// target checks the flags (usage errors) and returns the reset target.
func (f resetFlags) target(cmd *cobra.Command) (client.ResetTarget, error) {
	var set []string
	for _, name := range []string{"to-time", "to-offset", "to-earliest", "to-latest"} {
		if cmd.Flags().Changed(name) {
			set = append(set, "--"+name)
		}
	}
	switch {
	case f.topic == "":
		return client.ResetTarget{}, usagef("-t TOPIC is required")
	case len(set) == 0:
		return client.ResetTarget{}, usagef("give one of --to-time, --to-offset, --to-earliest, --to-latest")
	case len(set) > 1:
		return client.ResetTarget{}, usagef("%s exclude each other: give one", strings.Join(set, " and "))
	}
	switch set[0] {
	case "--to-time":
		t, err := parseTime("--to-time", f.toTime)
		return client.ResetTarget{To: client.ResetToTime, Time: t}, err
	case "--to-offset":
		if f.toOffset < 0 {
			return client.ResetTarget{}, usagef("--to-offset %d is negative", f.toOffset)
		}
		return client.ResetTarget{To: client.ResetToOffset, Offset: f.toOffset}, nil
	case "--to-earliest":
		if !f.earliest {
			return client.ResetTarget{}, usagef("--to-earliest=false: give --to-earliest alone")
		}
		return client.ResetTarget{To: client.ResetToEarliest}, nil
	default:
		if !f.latest {
			return client.ResetTarget{}, usagef("--to-latest=false: give --to-latest alone")
		}
		return client.ResetTarget{To: client.ResetToLatest}, nil
	}
}

// parseTime parses an RFC3339 time (fractional seconds allowed) no earlier
// than the Unix epoch.
func parseTime(flag, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, usagef("%s %q: not an RFC3339 time (e.g. 2026-12-03T08:00:00Z)", flag, s)
	}
	if t.Before(time.Unix(0, 0)) {
		return time.Time{}, usagef("%s %q: before 1970", flag, s)
	}
	return t, nil
}

func groupList(e *env) error {
	c, err := e.connect()
	if err != nil {
		return err
	}
	defer c.Close()
	gs, err := c.ListGroups(e.ctx)
	if err != nil {
		return err
	}
	if e.json {
		for _, g := range gs {
			if err := e.emit(map[string]any{"group": g.Group, "topics": g.Topics, "lag": g.Lag}); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tTOPICS\tLAG")
	for _, g := range gs {
		fmt.Fprintf(tw, "%s\t%s\t%d\n", g.Group, strings.Join(g.Topics, ","), g.Lag)
	}
	return tw.Flush()
}

// groupQueueJSON is one queue of `group describe --json`.
type groupQueueJSON struct {
	Topic     string `json:"topic"`
	QueueID   int32  `json:"queueId"`
	Committed *int64 `json:"committedOffset"` // null: nothing committed
	Min       int64  `json:"minOffset"`
	Max       int64  `json:"maxOffset"`
	Lag       int64  `json:"lag"`
}

func groupDescribe(e *env, group, topic string) error {
	c, err := e.connect()
	if err != nil {
		return err
	}
	defer c.Close()
	qs, err := c.DescribeGroup(e.ctx, group, topic)
	if err != nil {
		return err
	}
	var total int64
	rows := make([]groupQueueJSON, len(qs))
	for i, q := range qs {
		total += q.Lag
		rows[i] = groupQueueJSON{Topic: q.Topic, QueueID: q.QueueID, Min: q.Min, Max: q.Max, Lag: q.Lag}
		if q.Committed != client.NoCommit {
			rows[i].Committed = &q.Committed
		}
	}
	members, tracked, err := c.GroupMembers(e.ctx, group)
	if err != nil {
		return err
	}
	if e.json {
		return e.emit(map[string]any{"group": group, "queues": rows, "lag": total,
			"members": append([]string{}, members...), "membersTracked": tracked})
	}
	fmt.Fprintf(e.stdout, "group %s\n", group)
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tQUEUE\tCOMMITTED\tMIN\tMAX\tLAG")
	for _, r := range rows {
		committed := "-"
		if r.Committed != nil {
			committed = fmt.Sprint(*r.Committed)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\n", r.Topic, r.QueueID, committed, r.Min, r.Max, r.Lag)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.stdout, "total lag: %d\nmembers: %s\n", total, membersLine(members, tracked))
	return err
}

func groupReset(e *env, group, topic string, target client.ResetTarget) error {
	c, err := e.connect()
	if err != nil {
		return err
	}
	defer c.Close()
	rs, err := c.ResetGroup(e.ctx, group, topic, target)
	if err != nil {
		return err
	}
	to := describeTarget(target)
	if e.json {
		qs := make([]map[string]any, len(rs))
		for i, r := range rs {
			var from *int64
			if r.From != client.NoCommit {
				from = &rs[i].From
			}
			qs[i] = map[string]any{"queueId": r.QueueID, "previousOffset": from, "offset": r.To}
		}
		return e.emit(map[string]any{"group": group, "topic": topic, "to": to, "queues": qs})
	}
	fmt.Fprintf(e.stdout, "reset group %s on topic %s to %s\n", group, topic, to)
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tPREVIOUS\tOFFSET")
	for _, r := range rs {
		prev := "-"
		if r.From != client.NoCommit {
			prev = fmt.Sprint(r.From)
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\n", r.QueueID, prev, r.To)
	}
	return tw.Flush()
}

// describeTarget names a reset target: "earliest", "latest", "offset N",
// "time RFC3339".
func describeTarget(t client.ResetTarget) string {
	switch t.To {
	case client.ResetToEarliest:
		return "earliest"
	case client.ResetToLatest:
		return "latest"
	case client.ResetToOffset:
		return fmt.Sprintf("offset %d", t.Offset)
	default:
		return "time " + t.Time.Format(time.RFC3339Nano)
	}
}
