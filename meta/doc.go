// Package meta is the store's metadata and the admin commands that change
// it: topics, consumer offsets, the queue table (the next queue offset of
// every queue), the producer table, delayed delivery's progress and the
// member map (each Raft server's client API address). The store keeps one
// Meta in memory, saves its encoding in the checkpoint and in snapshots,
// and between checkpoints rebuilds it from the command frames and message
// records of the commitlog.
//
// It is the one owner of the admin commands (Command: CreateTopic,
// UpdateTopic, DeleteTopic, CommitOffsets, SetDedup; SetMember's Raft entry
// is the FSM's) in both places they are stored: as a commitlog command
// frame (Frame, DecodeFrame) and as the body of a Raft log entry
// (AppendEntryBody, DecodeEntryBody, with the entry's own type numbers:
// EntryType, CommandOfEntry). The two layouts predate this
// package and stay byte for byte as they were.
//
// # Contract
//
//   - Encode is deterministic: maps are written in sorted order, so
//     replicas with the same state produce the same bytes. Decode accepts
//     exactly what Encode writes (and an empty encoding: an empty Meta).
//   - A command frame (the payload of a commitlog frame of kind
//     KindCommand) is built by one of the Encode* functions and applied by
//     Apply, on the live path and in recovery alike, so a replayed log
//     gives the state the live path had.
//   - Decoding never panics and allocates at most in proportion to its
//     input: a short, trailing or unknown encoding is ErrMalformed
//     (wrapped). A Raft entry body has exactly one encoding (minimal
//     uvarints) and its bounds (MaxStringBytes, MaxCommits) are refused
//     with ErrTooLarge on encode and ErrMalformed on decode.
//
// Both encodings are on-disk formats, documented in the repository's
// FORMAT.md; their bytes never change meaning.
package meta
