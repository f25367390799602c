// Package snapstore is the raft.SnapshotStore of a raftmq node. A local
// snapshot costs O(metadata): it holds the FSM's snapshot header and hard
// links to the commitlog segments below the confirm offset, never a copy of
// their bytes. Open turns either kind back into the stream fsm.Restore reads,
// so a leader's InstallSnapshot streams the linked segments to a follower.
//
// # Why links are enough
//
// Segment bytes below a snapshot's confirm offset never change: the segment
// holding the confirm offset is only appended beyond it, recovery only
// truncates beyond the checkpoint (which Persist moved to the confirm offset
// first), retention unlinks whole files (a link keeps the inode) and a
// restore swaps the store directory (the old inodes stay reachable through
// the links). A link shares the inode, so FlushTo's msync made the linked
// bytes durable too.
//
// # On-disk layout (FORMAT.md, "Snapshot store")
//
//	<dir>/
//	  <term>-<index>-<unixms>/     a finished snapshot (ID)
//	    meta.json                  {"crc":C,"body":B}: B is JSON {version, kind,
//	                               meta (raft.SnapshotMeta)}, C = CRC32-C of B's bytes
//	    header.bin                 kind "linked": fsm.EncodeSnapshotHeader (has its CRC)
//	    segments/<20-digit start>  kind "linked": hard link to the commitlog segment
//	                               starting there (a copy if linking is impossible)
//	    state.bin                  kind "stream": the stream as received from a leader
//	  <ID>.tmp/                    being written: removed when the store opens
//	  <ID>.del/                    being deleted: removed when the store opens
//
// A snapshot becomes visible by renaming its finished .tmp directory, after
// every file and the directory itself were synced, and the parent is synced
// after the rename; a deletion renames to .del first. So a crash leaves
// either a complete snapshot or a suffixed directory that is ignored and
// cleaned. A directory whose meta.json is missing or fails its CRC is
// ignored by List (and logged), never opened.
//
// Retention keeps the newest Retain snapshots (ordered by term, index, ID).
// A snapshot being read (Open not yet closed) is not deleted; it goes once
// its last reader closes.
package snapstore
