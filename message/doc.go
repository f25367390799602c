// Package message is raftmq's message and its bytes: what a producer hands
// the store (Message), RocketMQ's v1 message record byte for byte (Record),
// the frame record raftmq puts before every Raft entry's records in the
// commitlog, and the rules every layer applies to a message.
//
// format.go documents every byte (FORMAT.md §2 repeats it). It is a leaf:
// it imports nothing of raftmq, so the Go client decodes the records a Pull
// returns without linking the storage engine.
//
// # Codec
//
// EncodeRecord, DecodeRecord, EncodeFrame, DecodeFrame and EntryCRC work on
// plain byte slices and do not allocate; decoded records alias their input.
// DecodeRecord checks the record whole (every length against TOTALSIZE and
// the body CRC); every decode error matches ErrCorrupt. PutRecord and
// DecodeRecordSkipBodyCRC are the commitlog's fast paths, for a record it
// sized itself or one inside an entry whose CRC32C it verified.
//
// # Rules
//
// ValidateMessage and ValidateTopic are the one definition of a valid
// message (topic charset and MaxTopicLen, queue id, body and properties
// size). Properties is the one property decoder (AppendProperties and
// AppendProperty encode); GetProperty reads one key without allocating.
// TagsCode is Java's String.hashCode of TAGS, as RocketMQ's consume queue
// stores it; OffsetMsgID and ParseOffsetMsgID are RocketMQ's offset message
// id; HostPort.String and ParseHostPort render and read BORNHOST and
// STOREHOST.
package message
