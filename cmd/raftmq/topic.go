package main

import (
	"flag"
	"fmt"
	"text/tabwriter"
)

func runTopic(e *env, g *globals, args []string) error {
	if len(args) == 0 {
		return usagef("usage: topic create|update|list|describe|delete ...")
	}
	fs := newFlagSet("topic "+args[0], e.stderr)
	queues := fs.Int("queues", 8, "number of queues (create; update: the new, larger count)")
	perm := fs.Int("perm", 0, "update: permission bits, 2 write, 4 read, 6 both (0: keep)")
	pos, err := parse(e, g, fs, args[1:])
	if err != nil {
		return err
	}
	switch args[0] {
	case "update":
		if err := requireArgs(pos, 1, 1, "topic update T [--queues N] [--perm P]"); err != nil {
			return err
		}
		q := 0 // keep, unless --queues is given
		fs.Visit(func(f *flag.Flag) {
			if f.Name == "queues" {
				q = *queues
			}
		})
		if q < 0 || q > 1024 || *perm < 0 || *perm > 7 {
			return usagef("--queues %d must be in [1, 1024], --perm %d in [0, 7]", q, *perm)
		}
		if q == 0 && *perm == 0 {
			return usagef("topic update needs --queues or --perm")
		}
		return topicUpdate(e, pos[0], int32(q), int32(*perm))
	case "create":
		if err := requireArgs(pos, 1, 1, "topic create T [--queues N]"); err != nil {
			return err
		}
		if *queues < 1 || *queues > 1024 {
			return usagef("--queues %d out of range [1, 1024]", *queues)
		}
		return topicCreate(e, pos[0], int32(*queues))
	case "list":
		if err := requireArgs(pos, 0, 0, "topic list"); err != nil {
			return err
		}
		return topicList(e)
	case "describe":
		if err := requireArgs(pos, 1, 1, "topic describe T"); err != nil {
			return err
		}
		return topicDescribe(e, pos[0])
	case "delete":
		if err := requireArgs(pos, 1, 1, "topic delete T"); err != nil {
			return err
		}
		return topicDelete(e, pos[0])
	}
	return usagef("unknown topic command %q", args[0])
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
		fmt.Fprintf(e.stdout, "%s\t%d\n", t.Name, t.Queues)
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
