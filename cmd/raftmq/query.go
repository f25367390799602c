package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/raftmq/raftmq/client"
)

func queryCmd(e *env) *cobra.Command {
	var key, topic, id string
	var maxN int
	cmd := &cobra.Command{
		Use:   "query --key K -t T | --msg-id ID",
		Short: "Find messages by key or by message id",
		Args:  noArgs,
		RunE: e.action(func(e *env, _ *cobra.Command, _ []string) error {
			return query(e, key, topic, id, maxN)
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&key, "key", "", "message key (KEYS or UNIQ_KEY)")
	topicFlag(e, cmd, &topic, "topic (required with --key)")
	fl.StringVar(&id, "msg-id", "", "message id (UNIQ_KEY or offset msg id)")
	fl.IntVar(&maxN, "max", 64, "most messages to return for --key")
	return cmd
}

func query(e *env, key, topic, id string, maxN int) error {
	switch {
	case (key == "") == (id == ""):
		return usagef("give exactly one of --key K -t T or --msg-id ID")
	case key != "" && topic == "":
		return usagef("--key needs -t TOPIC")
	case maxN < 1 || maxN > 1024:
		return usagef("--max %d out of range [1, 1024]", maxN)
	}
	c, err := e.connect()
	if err != nil {
		return err
	}
	defer c.Close()
	var ms []client.ReceivedMessage
	if key != "" {
		ms, err = c.QueryByKey(e.ctx, topic, key, int32(maxN), time.Time{}, time.Time{})
	} else {
		ms, err = c.QueryByMsgID(e.ctx, topic, id)
	}
	if err != nil {
		return err
	}
	for _, m := range ms {
		if err := printMessage(e, m); err != nil {
			return err
		}
	}
	if len(ms) == 0 {
		return client.ErrNotFound
	}
	return nil
}
