package main

import (
	"time"

	"github.com/raftmq/raftmq/client"
)

func runQuery(e *env, g *globals, args []string) error {
	fs := newFlagSet("query", e.stderr)
	key := fs.String("key", "", "message key (KEYS or UNIQ_KEY)")
	topic := fs.String("t", "", "topic (required with --key)")
	id := fs.String("msg-id", "", "message id (UNIQ_KEY or offset msg id)")
	max := fs.Int("max", 64, "most messages to return for --key")
	pos, err := parse(e, g, fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return usagef("unexpected argument %q", pos[0])
	case (*key == "") == (*id == ""):
		return usagef("give exactly one of --key K -t T or --msg-id ID")
	case *key != "" && *topic == "":
		return usagef("--key needs -t TOPIC")
	case *max < 1 || *max > 1024:
		return usagef("--max %d out of range [1, 1024]", *max)
	}
	c, err := e.connect()
	if err != nil {
		return err
	}
	defer c.Close()
	var ms []client.ReceivedMessage
	if *key != "" {
		ms, err = c.QueryByKey(e.ctx, *topic, *key, int32(*max), time.Time{}, time.Time{})
	} else {
		ms, err = c.QueryByMsgID(e.ctx, *topic, *id)
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
