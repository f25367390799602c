package message

// On-disk format of the commitlog. Everything is big-endian (Java ByteBuffer
// order) so that stored message records are RocketMQ's bytes, as they lie.
//
// A segment is a sequence of Raft entries, each a frame record followed by the
// entry's message records, and it always ends with a BLANK filler:
//
//	segment := entry* blank
//	entry   := frame [command payload] record*
//
// # Message record: RocketMQ message layout v1, IPv4 hosts
//
//	off  size field
//	  0     4 TOTALSIZE        int32, whole record incl. this field
//	  4     4 MAGICCODE        0xDAA320A7 (MagicMessageV1)
//	  8     4 BODYCRC          CRC-32 IEEE of BODY (RocketMQ's UtilAll.crc32)
//	 12     4 QUEUEID          int32
//	 16     4 FLAG             int32
//	 20     8 QUEUEOFFSET      int64, index in the consume queue
//	 28     8 PHYSICALOFFSET   int64, absolute commitlog offset of this record
//	 36     4 SYSFLAG          int32 (IPv6 bits 0x10/0x20 are never set here)
//	 40     8 BORNTIMESTAMP    int64 ms
//	 48     8 BORNHOST         4-byte IPv4 + int32 port
//	 56     8 STORETIMESTAMP   int64 ms, the Raft entry's store timestamp
//	 64     8 STOREHOST        4-byte IPv4 + int32 port, the entry's store host
//	 72     4 RECONSUMETIMES   int32
//	 76     8 PREPAREDTXOFFSET int64
//	 84     4 BODYLENGTH       int32, 0..MaxBodySize
//	 88     n BODY
//	 88+n   1 TOPICLENGTH      int8, 1..127
//	 89+n   t TOPIC            [%|a-zA-Z0-9_-]+
//	 89+n+t 2 PROPERTIESLENGTH int16, 0..32767
//	 91+n+t p PROPERTIES       key 0x01 value 0x02, repeated
//
// TOTALSIZE = 91 + n + t + p. Unlike RocketMQ, the decoder checks every length
// against TOTALSIZE and the scanner checks PHYSICALOFFSET against the position
// it read the record at; the whole entry is covered by the frame's CRC32C, so
// a torn header or properties block is detected, not dispatched.
//
// # BLANK filler (RocketMQ's end-of-file marker)
//
//	0     4 TOTALSIZE   int32, bytes from here to the end of the segment (>= 8)
//	4     4 MAGICCODE   0xCBD43194 (MagicBlank)
//	8     … zeros (the preallocated file content)
//
// An entry is written in a segment only if entry size + BlankSize fits in what
// is left, so every segment ends with a blank and an entry is never split.
//
// # Frame record (raftmq's, version 1): one per applied Raft entry
//
//	off  size field
//	  0     4 TOTALSIZE      int32, FrameSize + len(command payload)
//	  4     4 MAGICCODE      0xDAA32FE0 (MagicFrame), distinct from RocketMQ's
//	  8     1 VERSION        uint8, 1
//	  9     1 KIND           uint8: 1 messages, 2 command, 3 no-op
//	 10     2 RESERVED       uint16, 0
//	 12     4 ENTRYSIZE      int32, frame + payload + all message records
//	 16     8 RAFTINDEX      uint64
//	 24     8 TERM           uint64
//	 32     8 STORETIMESTAMP int64 ms (equal to every record's STORETIMESTAMP)
//	 40     4 COUNT          int32, number of message records that follow
//	 44     4 CRC32C         Castagnoli over the entry [start, start+ENTRYSIZE)
//	                         minus this field: crc([0,44)) continued over
//	                         [48,ENTRYSIZE) (the 4 CRC bytes are skipped)
//	 48     p command payload (KIND 2 only; opaque to the commitlog)
//
// Kind rules: messages entries have no payload; command entries have COUNT 0;
// no-op entries have neither. Frames have a MAGICCODE no RocketMQ reader
// accepts; consume queues never point at them.
const (
	// MagicMessageV1 is RocketMQ's MESSAGE_MAGIC_CODE (v1 layout).
	MagicMessageV1 uint32 = 0xDAA320A7
	// MagicMessageV2 is RocketMQ's v2 layout (2-byte topic length); never
	// written here and rejected on read.
	MagicMessageV2 uint32 = 0xDAA320AB
	// MagicBlank is RocketMQ's BLANK_MAGIC_CODE, the end-of-segment filler.
	MagicBlank uint32 = 0xCBD43194
	// MagicFrame marks raftmq's Raft entry frame.
	MagicFrame uint32 = 0xDAA32FE0

	// FrameVersion is the only frame version written and accepted.
	FrameVersion = 1

	// MaxBodySize is RocketMQ's default maxMessageSize (4 MiB).
	MaxBodySize = 4 << 20
	// MaxTopicLen is the v1 limit (a signed byte).
	MaxTopicLen = 127
	// MaxPropertiesLen is Short.MAX_VALUE.
	MaxPropertiesLen = 32767
	// BlankSize is the bytes a blank writes and the room every segment keeps.
	BlankSize = 8
	// RecordFixedSize is the v1/IPv4 fixed part of a message record.
	RecordFixedSize = 91
	// MaxRecordSize bounds TOTALSIZE of a message record.
	MaxRecordSize = RecordFixedSize + MaxBodySize + MaxTopicLen + MaxPropertiesLen
	// FrameSize is the fixed part of a frame record.
	FrameSize = 48
	// MaxCommandSize bounds a command payload.
	MaxCommandSize = 16 << 20

	// SysFlagBornHostV6 and SysFlagStoreHostV6 select 16-byte IPv6 hosts;
	// this layout is IPv4 only, so they are rejected.
	SysFlagBornHostV6  = 0x10
	SysFlagStoreHostV6 = 0x20
)

// Message record field offsets.
const (
	OffTotalSize        = 0
	OffMagic            = 4
	OffBodyCRC          = 8
	OffQueueID          = 12
	OffFlag             = 16
	OffQueueOffset      = 20
	OffPhysicalOffset   = 28
	OffSysFlag          = 36
	OffBornTimestamp    = 40
	OffBornHost         = 48
	OffStoreTimestamp   = 56
	OffStoreHost        = 64
	OffReconsumeTimes   = 72
	OffPreparedTxOffset = 76
	OffBodyLength       = 84
	OffBody             = 88
)

// Frame record field offsets.
const (
	FrameOffTotalSize      = 0
	FrameOffMagic          = 4
	FrameOffVersion        = 8
	FrameOffKind           = 9
	FrameOffReserved       = 10
	FrameOffEntrySize      = 12
	FrameOffRaftIndex      = 16
	FrameOffTerm           = 24
	FrameOffStoreTimestamp = 32
	FrameOffCount          = 40
	FrameOffCRC            = 44
)

// Kind says what a Raft entry frame carries.
type Kind uint8

const (
	// KindMessages: message records follow the frame.
	KindMessages Kind = 1
	// KindCommand: an opaque command payload inside the frame.
	KindCommand Kind = 2
	// KindNoop: nothing (leader no-ops, config changes): keeps the index.
	KindNoop Kind = 3
)

// Valid reports whether k is one of the kinds above.
func (k Kind) Valid() bool { return k >= KindMessages && k <= KindNoop }

// Property keys the store reads (RocketMQ MessageConst).
const (
	PropertyKeys    = "KEYS"
	PropertyTags    = "TAGS"
	PropertyUniqKey = "UNIQ_KEY"
	// PropertyProducerSeq marks an idempotent send: "<producer>:<seq>",
	// a producer id (1-64 bytes, no ':') and a decimal uint64 sequence
	// (ParseProducerSeq). The store keeps, per producer, the highest
	// sequences it stored and answers a repeat with the first result.
	PropertyProducerSeq = "PSEQ"
	// Delayed delivery (store/timer.go). A message asks for it with one
	// of RocketMQ's properties: DELAY (a delay level 1-18), TIMER_DELIVER_MS
	// (epoch milliseconds), TIMER_DELAY_SEC or TIMER_DELAY_MS (relative to
	// its store time). The store keeps it in ScheduleTopic with REAL_TOPIC,
	// REAL_QID and TIMER_OUT_MS (the due time) until it is due, then stores
	// a copy in the real topic carrying TIMER_DELIVERED (the delivery's
	// time, reserved: dropped from a client's message).
	PropertyDelayLevel     = "DELAY"
	PropertyTimerDeliverMs = "TIMER_DELIVER_MS"
	PropertyTimerDelaySec  = "TIMER_DELAY_SEC"
	PropertyTimerDelayMs   = "TIMER_DELAY_MS"
	PropertyRealTopic      = "REAL_TOPIC"
	PropertyRealQueueID    = "REAL_QID"
	PropertyTimerOutMs     = "TIMER_OUT_MS"
	PropertyTimerDelivered = "TIMER_DELIVERED"
	// PropertyKeySeparator separates several keys in KEYS.
	PropertyKeySeparator = " "
	// nameValueSep and propertySep are RocketMQ's NAME_VALUE_SEPARATOR and
	// PROPERTY_SEPARATOR.
	nameValueSep = 0x01
	propertySep  = 0x02
)
