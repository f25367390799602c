package fsm

// This file fixes the two byte formats the FSM owns: the Raft log entry (a
// Command) and the snapshot stream. Both are big-endian. FORMAT.md at the
// repository root refers here.
//
// # Raft log entry (raft.Log.Data of a LogCommand entry)
//
//	+---------+------+----------------------+
//	| version | type | body (per type)      |
//	| u8 = 1  | u8   |                      |
//	+---------+------+----------------------+
//
// str  = uvarint length (≤ MaxStringBytes) + bytes
// blob = uvarint length + bytes
// host = 4-byte IPv4 + i32 port (RocketMQ's BORNHOST/STOREHOST layout)
//
//	MessageBatch (1):  leaderTimestamp i64, leaderHost host, count uvarint
//	                   (≤ MaxBatchMessages), then per message:
//	                   topic str, queueId i32, flag i32, sysFlag i32,
//	                   bornTimestamp i64, bornHost host, reconsumeTimes i32,
//	                   preparedTxOffset i64, body blob (≤ MaxCommandBytes),
//	                   properties blob (≤ 65535)
//	CommitOffsets (2): count uvarint (≤ MaxCommits), then per commit:
//	                   group str, topic str, queueId i32, offset i64
//	CreateTopic (3), UpdateTopic (4): name str, queues i32, perm i32
//	DeleteTopic (5):   name str
//	                   (the admin commands 2-5: type numbers and bodies
//	                   are package meta's, meta/entry.go)
//	SetMemberMeta (6): serverId str, apiAddr str
//	DeliverDue (7):    leaderTimestamp i64, leaderHost host (store.DeliverDue:
//	                   the scheduled messages due by the entry's store time)
//
// A decoder rejects a wrong version, an unknown type, a short field, a count
// that cannot fit in the remaining bytes and trailing bytes. The whole entry
// is at most MaxCommandBytes. Nothing in an entry depends on the node that
// applies it: the store timestamp and host of every record come from the
// leader's timestamp and host above (the FSM keeps timestamps non-decreasing).
//
// # Snapshot stream (what FSMSnapshot.Persist writes and FSM.Restore reads)
//
//	header:
//	  magic          u32 = SnapshotMagic ("RMQS")
//	  version        u16 = SnapshotVersion (1)
//	  appliedIndex   u64
//	  appliedTerm    u64
//	  confirmOffset  i64
//	  minOffset      i64
//	  lastEntryOff   i64   (start of the entry ending at confirmOffset, -1: none)
//	  storeTimestamp i64   (store time of that entry)
//	  metaLen        u32, meta [metaLen]byte       (store.Snapshot.Meta, opaque)
//	  memberCount    u32, then per member: id str16, apiAddr str16
//	  segmentCount   u32, then per segment: start i64, length i64
//	  headerCRC      u32 = CRC32-C of every header byte before it
//	body, for each segment in header order:
//	  bytes          [length]byte  (segment file bytes [0, length), where
//	                                length = min(file size, confirmOffset-start))
//	  segmentCRC     u32 = CRC32-C of those bytes
//	trailer:
//	  magic          u32 = SnapshotEndMagic ("RMQE")
//
// str16 = u16 length + bytes. The header comes first and is small, so a
// snapshot store that keeps segments as hard links (node/snapstore: Persist
// hands a SegmentLinker sink the header and the segment files instead of the
// stream) regenerates this exact stream with NewSnapshotReader when a
// follower needs an InstallSnapshot; StreamSize gives its length up front.
//
// Crash argument: Persist calls store.FlushTo(confirmOffset) before it writes
// a byte, so when the sink closes (and Raft may compact its log up to the
// snapshot index) the commitlog and checkpoint are durable up to that index
// (NATS #8425). Restore checks every CRC before the store renames staged
// segments into place, so a torn or corrupt stream never replaces the store.

import "github.com/raftmq/raftmq/meta"

// CommandVersion is the first byte of every Raft log entry.
const CommandVersion byte = 1

// Bounds enforced by both encoder and decoder.
const (
	MaxCommandBytes  = 64 << 20 // one Raft entry
	MaxBatchMessages = 1 << 16
	MaxCommits       = meta.MaxCommits
	MaxStringBytes   = meta.MaxStringBytes

	// minMessageBytes is the smallest encoded message: empty topic, body and
	// properties (1 byte each) plus the fixed fields.
	minMessageBytes = 1 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 1 + 1
)

// Snapshot stream constants.
const (
	SnapshotMagic    uint32 = 0x524D5153 // "RMQS"
	SnapshotEndMagic uint32 = 0x524D5145 // "RMQE"
	SnapshotVersion  uint16 = 1

	maxSnapshotMeta     = 1 << 30
	maxSnapshotMembers  = 1 << 12
	maxSnapshotSegments = 1 << 20
)
