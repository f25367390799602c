package message

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// ValidateMessage checks m against the layout and RocketMQ's rules: topic
// 1..127 bytes of [%|a-zA-Z0-9_-], queue id >= 0, body at most maxBody bytes
// (MaxBodySize when maxBody <= 0 or larger), properties at most
// MaxPropertiesLen bytes, no IPv6 sysflag bits. (The store checks the
// properties it reads, PSEQ and the delay properties, itself.)
func ValidateMessage(m *Message, maxBody int) error {
	if maxBody <= 0 || maxBody > MaxBodySize {
		maxBody = MaxBodySize
	}
	if err := ValidateTopic(m.Topic); err != nil {
		return err
	}
	if m.QueueID < 0 {
		return fmt.Errorf("%w: %d", ErrBadQueueID, m.QueueID)
	}
	if len(m.Body) > maxBody {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrBodyTooLarge, len(m.Body), maxBody)
	}
	return CheckLengths(m)
}

// ValidateTopic applies RocketMQ's TopicValidator rule, the one topic rule
// of raftmq (the store, the API and the consume-queue directories use it):
// 1..MaxTopicLen bytes of letters, digits and _ - % |. Such a name is also a
// safe directory name.
func ValidateTopic(topic string) error {
	switch {
	case topic == "":
		return fmt.Errorf("%w: topic is empty", ErrBadTopic)
	case len(topic) > MaxTopicLen:
		return fmt.Errorf("%w: topic %.20q... is %d bytes; the limit is %d", ErrBadTopic, topic, len(topic), MaxTopicLen)
	}
	for i := 0; i < len(topic); i++ {
		if !topicChar(topic[i]) {
			return fmt.Errorf("%w: topic %q: illegal character %q at %d; use letters, digits, _ - %% |", ErrBadTopic, topic, topic[i], i)
		}
	}
	return nil
}

func topicChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return c == '%' || c == '|' || c == '-' || c == '_'
}

// Property is one key/value pair of a message's properties.
type Property struct {
	Key, Value string
}

// AppendProperties appends props in RocketMQ's encoding (key 0x01 value
// 0x02 per pair, in the given order). Keys must be non-empty and neither keys
// nor values may contain 0x01 or 0x02 (ErrBadProperty).
func AppendProperties(dst []byte, props ...Property) ([]byte, error) {
	for _, p := range props {
		if p.Key == "" || strings.ContainsAny(p.Key, "\x01\x02") || strings.ContainsAny(p.Value, "\x01\x02") {
			return dst, fmt.Errorf("%w: %q", ErrBadProperty, p.Key)
		}
		dst = AppendProperty(dst, p.Key, p.Value)
	}
	return dst, nil
}

// AppendProperty appends one pair in RocketMQ's encoding without checking
// it: for callers that validated key and value already.
func AppendProperty(dst []byte, key, value string) []byte {
	dst = append(dst, key...)
	dst = append(dst, nameValueSep)
	dst = append(dst, value...)
	return append(dst, propertySep)
}

// EncodeProperties encodes props in order (see AppendProperties).
func EncodeProperties(props ...Property) ([]byte, error) {
	return AppendProperties(nil, props...)
}

// EncodePropertiesMap encodes m with keys in sorted order, so the bytes are
// deterministic.
func EncodePropertiesMap(m map[string]string) ([]byte, error) {
	props := make([]Property, 0, len(m))
	for k, v := range m {
		props = append(props, Property{k, v})
	}
	sort.Slice(props, func(i, j int) bool { return props[i].Key < props[j].Key })
	return EncodeProperties(props...)
}

// Properties iterates over the pairs of encoded props in order; keys and
// values alias props. This is the one property decoder: the last pair may
// lack its trailing 0x02, and a pair without 0x01 or with an empty key is
// skipped, as RocketMQ's decoder does. It never panics.
func Properties(props []byte) iter.Seq2[[]byte, []byte] {
	return func(yield func(key, value []byte) bool) {
		for len(props) > 0 {
			var pair []byte
			if i := bytes.IndexByte(props, propertySep); i >= 0 {
				pair, props = props[:i], props[i+1:]
			} else {
				pair, props = props, nil
			}
			k, v, ok := bytes.Cut(pair, []byte{nameValueSep})
			if ok && len(k) > 0 && !yield(k, v) {
				return
			}
		}
	}
}

// GetProperty returns the value of the first pair with key in encoded props
// without allocating; the value aliases props.
func GetProperty(props []byte, key string) ([]byte, bool) {
	for k, v := range Properties(props) {
		if string(k) == key {
			return v, true
		}
	}
	return nil, false
}

// StoreProperties are the property values the store reads of a record,
// aliasing its encoded properties: TAGS (the consume-queue tags code), KEYS
// and UNIQ_KEY (the hash index) and PSEQ (the producer dedup table).
type StoreProperties struct {
	Tags, Keys, Uniq, ProducerSeq []byte
	// Timer is the first delay property (DELAY, TIMER_DELIVER_MS,
	// TIMER_DELAY_SEC, TIMER_DELAY_MS) and TimerKey its key; TimerOut is
	// TIMER_OUT_MS and Delivered TIMER_DELIVERED.
	Timer, TimerOut, Delivered []byte
	TimerKey                   string
}

// ReadStoreProperties returns, in one pass over encoded props, the values
// the store reads. The rules are GetProperty's (the first occurrence wins);
// an absent property is nil. The live append and recovery's replay both
// read them here, so they index and deduplicate alike.
func ReadStoreProperties(props []byte) StoreProperties {
	var sp StoreProperties
	var haveTags, haveKeys, haveUniq, haveSeq, haveOut, haveDelivered bool
	for k, v := range Properties(props) {
		switch {
		case !haveTags && string(k) == PropertyTags:
			sp.Tags, haveTags = v, true
		case !haveKeys && string(k) == PropertyKeys:
			sp.Keys, haveKeys = v, true
		case !haveUniq && string(k) == PropertyUniqKey:
			sp.Uniq, haveUniq = v, true
		case !haveSeq && string(k) == PropertyProducerSeq:
			sp.ProducerSeq, haveSeq = v, true
		case sp.TimerKey == "":
			sp.TimerKey = timerKey(k)
			if sp.TimerKey != "" {
				sp.Timer = v
			}
		}
		switch {
		case !haveOut && string(k) == PropertyTimerOutMs:
			sp.TimerOut, haveOut = v, true
		case !haveDelivered && string(k) == PropertyTimerDelivered:
			sp.Delivered, haveDelivered = v, true
		}
	}
	return sp
}

// timerKey returns k's name if it is a delay property, else "".
func timerKey(k []byte) string {
	switch string(k) {
	case PropertyDelayLevel:
		return PropertyDelayLevel
	case PropertyTimerDeliverMs:
		return PropertyTimerDeliverMs
	case PropertyTimerDelaySec:
		return PropertyTimerDelaySec
	case PropertyTimerDelayMs:
		return PropertyTimerDelayMs
	}
	return ""
}

// IndexedProperties returns TAGS, KEYS and UNIQ_KEY as ReadStoreProperties
// reads them.
func IndexedProperties(props []byte) (tags, keys, uniq []byte) {
	sp := ReadStoreProperties(props)
	return sp.Tags, sp.Keys, sp.Uniq
}

// MaxProducerIDBytes bounds the producer id of a PSEQ value.
const MaxProducerIDBytes = 64

// ErrBadProducerSeq is returned (wrapped) for a PSEQ value that does not
// parse.
var ErrBadProducerSeq = errors.New("message: bad PSEQ property")

// ParseProducerSeq splits a PSEQ value "<producer>:<seq>" into the producer
// id (aliasing v) and the sequence. The sequence is decimal digits only,
// without a sign or leading zeros, and fits a uint64.
func ParseProducerSeq(v []byte) (producer []byte, seq uint64, err error) {
	i := bytes.LastIndexByte(v, ':')
	if i <= 0 || i > MaxProducerIDBytes {
		return nil, 0, fmt.Errorf("%w: %q: want <producer id of 1-%d bytes>:<sequence>", ErrBadProducerSeq, v, MaxProducerIDBytes)
	}
	digits := v[i+1:]
	if len(digits) == 0 || len(digits) > 20 || (digits[0] == '0' && len(digits) > 1) {
		return nil, 0, fmt.Errorf("%w: %q: the sequence is not a decimal uint64", ErrBadProducerSeq, v)
	}
	for _, c := range digits {
		d := uint64(c - '0')
		if c < '0' || c > '9' || seq > (math.MaxUint64-d)/10 {
			return nil, 0, fmt.Errorf("%w: %q: the sequence is not a decimal uint64", ErrBadProducerSeq, v)
		}
		seq = seq*10 + d
	}
	return v[:i], seq, nil
}

// AppendProducerSeq appends the PSEQ value of producer and seq to dst.
func AppendProducerSeq(dst []byte, producer string, seq uint64) []byte {
	dst = append(dst, producer...)
	dst = append(dst, ':')
	return strconv.AppendUint(dst, seq, 10)
}

// TagsCode is RocketMQ's tagsCode for a TAGS value: Java's String.hashCode
// (over UTF-16 code units) as an int64 of the int32. Empty tags give 0.
func TagsCode(tag string) int64 {
	var h int32
	for _, r := range tag {
		h = hashRune(h, r)
	}
	return int64(h)
}

// TagsCodeBytes is TagsCode of a TAGS value still in its record.
func TagsCodeBytes(tag []byte) int64 {
	var h int32
	for len(tag) > 0 {
		r, n := utf8.DecodeRune(tag)
		h = hashRune(h, r)
		tag = tag[n:]
	}
	return int64(h)
}

func hashRune(h int32, r rune) int32 {
	if r >= 0x10000 {
		r1, r2 := utf16.EncodeRune(r)
		return 31*(31*h+r1) + r2
	}
	return 31*h + r
}

// OffsetMsgIDLen is the length of an IPv4 offset message id.
const OffsetMsgIDLen = 32

// AppendOffsetMsgID appends RocketMQ's offsetMsgId: upper-case hex of the
// store IP (4), port (4, big-endian) and physical offset (8).
func AppendOffsetMsgID(dst []byte, host HostPort, phy int64) []byte {
	var raw [16]byte
	putHost(raw[:8], host)
	be.PutUint64(raw[8:], uint64(phy))
	const digits = "0123456789ABCDEF"
	for _, c := range raw {
		dst = append(dst, digits[c>>4], digits[c&0xF])
	}
	return dst
}

// OffsetMsgID is AppendOffsetMsgID as a string.
func OffsetMsgID(host HostPort, phy int64) string {
	var buf [OffsetMsgIDLen]byte
	return string(AppendOffsetMsgID(buf[:0], host, phy))
}

// ParseOffsetMsgID is the inverse of OffsetMsgID (either hex case).
func ParseOffsetMsgID(id string) (HostPort, int64, error) {
	var raw [16]byte
	if len(id) != OffsetMsgIDLen {
		return HostPort{}, 0, fmt.Errorf("%w: length %d", ErrBadMsgID, len(id))
	}
	if _, err := hex.Decode(raw[:], []byte(id)); err != nil {
		return HostPort{}, 0, fmt.Errorf("%w: %v", ErrBadMsgID, err)
	}
	phy := int64(be.Uint64(raw[8:]))
	if phy < 0 {
		return HostPort{}, 0, fmt.Errorf("%w: negative offset", ErrBadMsgID)
	}
	return getHost(raw[:8]), phy, nil
}
