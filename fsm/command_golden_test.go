package fsm

import (
	"encoding/hex"
	"testing"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/meta"
	"github.com/raftmq/raftmq/store"
)

// The admin commands' Raft entries are on disk (the Raft log): their bytes
// are pinned, as they were before package meta took the bodies over.
func TestAdminEntriesGolden(t *testing.T) {
	for _, c := range []struct {
		cmd  Command
		want string
	}{
		{Command{Type: CmdCommitOffsets, Commits: []store.OffsetCommit{{Group: "g", Topic: "t", QueueID: 1, Offset: 9}, {Group: "h", Topic: "u", QueueID: 2, Offset: 300}}},
			"010202016701740000000100000000000000090168017500000002000000000000012c"},
		{Command{Type: CmdCreateTopic, Topic: store.TopicConfig{Name: "t", Queues: 4, Perm: 6}}, "010301740000000400000006"},
		{Command{Type: CmdUpdateTopic, Topic: store.TopicConfig{Name: "t", Queues: 8}}, "010401740000000800000000"},
		{Command{Type: CmdDeleteTopic, TopicName: "t"}, "01050174"},
		{Command{Type: CmdDeliverDue, LeaderTimestamp: 0x0102030405, LeaderHost: message.HostPort{IP: [4]byte{10, 0, 0, 1}, Port: 7000}},
			"0107" + "0000000102030405" + "0a000001" + "00001b58"},
		{Command{Type: CmdSetDedup, Dedup: meta.DedupConfig{Window: 4096, Expiry: 3_600_000}}, "0108" + "00001000" + "000000000036ee80"},
	} {
		b, err := c.cmd.Encode(nil)
		if err != nil || hex.EncodeToString(b) != c.want {
			t.Errorf("%s: %x %v, want %s", c.cmd.Type, b, err, c.want)
		}
	}
}

// The FSM's admin command types are meta's entry types.
func TestAdminTypesAreMetas(t *testing.T) {
	for ct, mt := range map[CommandType]meta.CommandType{
		CmdCommitOffsets: meta.CommitOffsets, CmdCreateTopic: meta.CreateTopic,
		CmdUpdateTopic: meta.UpdateTopic, CmdDeleteTopic: meta.DeleteTopic, CmdSetDedup: meta.SetDedup,
	} {
		if got, ok := meta.CommandOfEntry(byte(ct)); !ok || got != mt || mt.EntryType() != byte(ct) {
			t.Errorf("%s: meta says %s %v, entry type %d", ct, got, ok, mt.EntryType())
		}
	}
	for _, ct := range []CommandType{CmdMessageBatch, CmdSetMemberMeta, CmdDeliverDue, 0, 9} {
		if _, ok := meta.CommandOfEntry(byte(ct)); ok {
			t.Errorf("%s is an admin command to meta", ct)
		}
	}
}
