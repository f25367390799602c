package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func topicCmd(e *env) *cobra.Command {
	var queues, perm int
	create := &cobra.Command{
		Use:   "create T [--queues N]",
		Short: "Create topic T with N queues",
		Args:  positional(1, 1, "topic create T [--queues N]"),
		RunE: e.action(func(e *env, cmd *cobra.Command, args []string) error {
			if queues < 1 || queues > 1024 {
				return usagef("--queues %d out of range [1, 1024]", queues)
			}
			return topicCreate(e, args[0], int32(queues))
		}),
	}
	create.Flags().IntVar(&queues, "queues", 8, "number of queues")
	update := &cobra.Command{
		Use:               "update T [--queues N] [--perm P]",
		ValidArgsFunction: completeFirstTopic(e),
		Short:             "Grow topic T's queues or change its permission",
		Args:              positional(1, 1, "topic update T [--queues N] [--perm P]"),
		RunE: e.action(func(e *env, cmd *cobra.Command, args []string) error {
			q := 0 // keep, unless --queues is given
			if cmd.Flags().Changed("queues") {
				q = queues
			}
			if q < 0 || q > 1024 || perm < 0 || perm > 7 {
				return usagef("--queues %d must be in [1, 1024], --perm %d in [0, 7]", q, perm)
			}
			if q == 0 && perm == 0 {
				return usagef("topic update needs --queues or --perm")
			}
			return topicUpdate(e, args[0], int32(q), int32(perm))
		}),
	}
	update.Flags().IntVar(&queues, "queues", 8, "the new, larger number of queues")
	update.Flags().IntVar(&perm, "perm", 0, "permission bits: 2 write, 4 read, 6 both (0: keep)")
	list := &cobra.Command{
		Use:   "list",
		Short: "List topics: name, queues, permission",
		Args:  positional(0, 0, "topic list"),
		RunE:  e.action(func(e *env, _ *cobra.Command, _ []string) error { return topicList(e) }),
	}
	describe := &cobra.Command{
		Use:               "describe T",
		ValidArgsFunction: completeFirstTopic(e),
		Short:             "Show topic T and each queue's min and max offset",
		Args:              positional(1, 1, "topic describe T"),
		RunE:              e.action(func(e *env, _ *cobra.Command, args []string) error { return topicDescribe(e, args[0]) }),
	}
	del := &cobra.Command{
		Use:               "delete T",
		ValidArgsFunction: completeFirstTopic(e),
		Short:             "Delete topic T",
		Args:              positional(1, 1, "topic delete T"),
		RunE:              e.action(func(e *env, _ *cobra.Command, args []string) error { return topicDelete(e, args[0]) }),
	}
	return group("topic", "Create, update, list, describe and delete topics", create, update, list, describe, del)
}

func topicCreate(e *env, name string, queues int32) error {
	c, err := e.connect()
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.CreateTopic(e.ctx, name, queues); err != nil {
		return err
	}
	if e.json {
		return e.emit(map[string]any{"topic": name, "queues": queues, "created": true})
	}
	fmt.Fprintf(e.stdout, "created topic %s with %d queues\n", name, queues)
	return nil
}

func topicUpdate(e *env, name string, queues, perm int32) error {
	c, err := e.connect()
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.UpdateTopic(e.ctx, name, queues, perm); err != nil {
		return err
	}
	t, err := c.DescribeTopic(e.ctx, name)
	if err != nil {
		return err
	}
	if e.json {
		return e.emit(map[string]any{"topic": t.Name, "queues": t.Queues, "perm": t.Perm, "updated": true})
	}
	fmt.Fprintf(e.stdout, "updated topic %s: %d queues, perm %d\n", t.Name, t.Queues, t.Perm)
	return nil
}

func topicList(e *env) error {
	c, err := e.connect()
	if err != nil {
		return err
	}
	defer c.Close()
	ts, err := c.ListTopics(e.ctx)
	if err != nil {
		return err
	}
	for _, t := range ts {
		if e.json {
			if err := e.emit(map[string]any{"topic": t.Name, "queues": t.Queues, "perm": t.Perm}); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(e.stdout, "%s\t%d\t%d\n", t.Name, t.Queues, t.Perm)
	}
	return nil
}

func topicDescribe(e *env, name string) error {
	c, err := e.connect()
	if err != nil {
		return err
	}
	defer c.Close()
	t, err := c.DescribeTopic(e.ctx, name)
	if err != nil {
		return err
	}
	if e.json {
		qs := make([]map[string]any, 0, len(t.Offsets))
		for _, q := range t.Offsets {
			qs = append(qs, map[string]any{"queueId": q.QueueID, "minOffset": q.Min, "maxOffset": q.Max})
		}
		return e.emit(map[string]any{"topic": t.Name, "queues": t.Queues, "perm": t.Perm, "queueOffsets": qs})
	}
	fmt.Fprintf(e.stdout, "topic %s: %d queues, perm %d\n", t.Name, t.Queues, t.Perm)
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tMIN\tMAX")
	for _, q := range t.Offsets {
		fmt.Fprintf(tw, "%d\t%d\t%d\n", q.QueueID, q.Min, q.Max)
	}
	return tw.Flush()
}

func topicDelete(e *env, name string) error {
	c, err := e.connect()
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.DeleteTopic(e.ctx, name); err != nil {
		return err
	}
	if e.json {
		return e.emit(map[string]any{"topic": name, "deleted": true})
	}
	fmt.Fprintf(e.stdout, "deleted topic %s\n", name)
	return nil
}
