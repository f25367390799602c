package remoting

import (
	"fmt"
	"strconv"
)

// SendHeader is the custom header of SEND_MESSAGE (long field names),
// SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE (the V2 short names a..n).
type SendHeader struct {
	ProducerGroup         string
	Topic                 string
	DefaultTopic          string
	DefaultTopicQueueNums int32
	QueueID               int32
	SysFlag               int32
	BornTimestamp         int64
	Flag                  int32
	Properties            string // name\x01value\x02 pairs
	ReconsumeTimes        int32
	UnitMode              bool
	MaxReconsumeTimes     int32
	Batch                 bool
	BrokerName            string
}

// sendFields names each SendHeader field in the long and the V2 form.
var sendFields = []struct{ long, short string }{
	{"producerGroup", "a"}, {"topic", "b"}, {"defaultTopic", "c"}, {"defaultTopicQueueNums", "d"},
	{"queueId", "e"}, {"sysFlag", "f"}, {"bornTimestamp", "g"}, {"flag", "h"}, {"properties", "i"},
	{"reconsumeTimes", "j"}, {"unitMode", "k"}, {"maxReconsumeTimes", "l"}, {"batch", "m"}, {"bname", "n"},
}

// fieldReader reads typed ext fields, keeping the first error.
type fieldReader struct {
	fields map[string]string
	err    error
}

func (r *fieldReader) str(key string) string { return r.fields[key] }

// i64 parses key as an integer of bits bits; absent or empty is 0.
func (r *fieldReader) i64(key string, bits int) int64 {
	v, ok := r.fields[key]
	if !ok || v == "" || r.err != nil {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, bits)
	if err != nil {
		r.err = fmt.Errorf("%w: field %s = %q is not a %d-bit integer", ErrMalformed, key, v, bits)
	}
	return n
}

func (r *fieldReader) i32(key string) int32 { return int32(r.i64(key, 32)) }

// boolean parses key as true/false; absent or empty is false.
func (r *fieldReader) boolean(key string) bool {
	v, ok := r.fields[key]
	if !ok || v == "" || r.err != nil {
		return false
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		r.err = fmt.Errorf("%w: field %s = %q is not a boolean", ErrMalformed, key, v)
	}
	return b
}

// ParseSendHeader reads a send request's header: the V2 short names for
// SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE, the long names otherwise. A
// number that does not parse is an error wrapping ErrMalformed; a missing
// topic too.
func ParseSendHeader(c *Command) (SendHeader, error) {
	name := func(i int) string { return sendFields[i].long }
	if c.Code == CodeSendMessageV2 || c.Code == CodeSendBatchMessage {
		name = func(i int) string { return sendFields[i].short }
	}
	r := &fieldReader{fields: c.ExtFields}
	h := SendHeader{
		ProducerGroup: r.str(name(0)), Topic: r.str(name(1)), DefaultTopic: r.str(name(2)),
		DefaultTopicQueueNums: r.i32(name(3)), QueueID: r.i32(name(4)), SysFlag: r.i32(name(5)),
		BornTimestamp: r.i64(name(6), 64), Flag: r.i32(name(7)), Properties: r.str(name(8)),
		ReconsumeTimes: r.i32(name(9)), UnitMode: r.boolean(name(10)), MaxReconsumeTimes: r.i32(name(11)),
		Batch: r.boolean(name(12)), BrokerName: r.str(name(13)),
	}
	if r.err == nil && h.Topic == "" {
		r.err = fmt.Errorf("%w: send without a topic (field %s)", ErrMalformed, name(1))
	}
	return h, r.err
}

// Fields is h in the long names (SEND_MESSAGE's), or the V2 short names.
func (h SendHeader) Fields(short bool) map[string]string {
	values := []string{h.ProducerGroup, h.Topic, h.DefaultTopic, itoa(h.DefaultTopicQueueNums), itoa(h.QueueID),
		itoa(h.SysFlag), strconv.FormatInt(h.BornTimestamp, 10), itoa(h.Flag), h.Properties, itoa(h.ReconsumeTimes),
		strconv.FormatBool(h.UnitMode), itoa(h.MaxReconsumeTimes), strconv.FormatBool(h.Batch), h.BrokerName}
	out := make(map[string]string, len(values))
	for i, v := range values {
		if short {
			out[sendFields[i].short] = v
		} else {
			out[sendFields[i].long] = v
		}
	}
	return out
}

func itoa(n int32) string { return strconv.FormatInt(int64(n), 10) }

// BatchMessage is one message of a SEND_BATCH_MESSAGE body.
type BatchMessage struct {
	Flag       int32
	Body       []byte
	Properties []byte // name\x01value\x02 pairs
}

// batchFixed is a batch message's size without body and properties:
// TOTALSIZE, MAGICCODE, BODYCRC, FLAG, BODYLEN (int32 each), PROPLEN (int16).
const batchFixed = 4*5 + 2

// DecodeBatch splits a SEND_BATCH_MESSAGE body into its messages: each is
// TOTALSIZE MAGICCODE BODYCRC FLAG BODYLEN BODY PROPLEN(u16) PROPERTIES,
// and TOTALSIZE must be exactly what its lengths add up to. The messages'
// slices alias body. The magic and CRC fields are not checked (the Go
// client sends zeros).
func DecodeBatch(body []byte) ([]BatchMessage, error) {
	var out []BatchMessage
	for pos := 0; pos < len(body); {
		rest := body[pos:]
		if len(rest) < batchFixed {
			return nil, fmt.Errorf("%w: batch message at %d: %d bytes, at least %d", ErrMalformed, pos, len(rest), batchFixed)
		}
		total := int64(int32(be.Uint32(rest)))
		bodyLen := int64(int32(be.Uint32(rest[16:])))
		if bodyLen < 0 || bodyLen > int64(len(rest))-batchFixed {
			return nil, fmt.Errorf("%w: batch message at %d: body length %d, %d bytes left", ErrMalformed, pos, bodyLen, len(rest)-batchFixed)
		}
		propLen := int64(be.Uint16(rest[20+bodyLen:]))
		if want := batchFixed + bodyLen + propLen; total != want || want > int64(len(rest)) {
			return nil, fmt.Errorf("%w: batch message at %d: total size %d, its fields need %d (%d bytes left)", ErrMalformed, pos, total, want, len(rest))
		}
		out = append(out, BatchMessage{Flag: int32(be.Uint32(rest[12:])), Body: rest[20 : 20+bodyLen],
			Properties: rest[22+bodyLen : 22+bodyLen+propLen]})
		pos += int(total)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: empty batch", ErrMalformed)
	}
	return out, nil
}

// AppendBatchMessage appends m in the batch layout (magic and CRC zero, as
// the Go client writes them). Properties above 65,535 bytes are an error.
func AppendBatchMessage(dst []byte, m BatchMessage) ([]byte, error) {
	if len(m.Properties) > 1<<16-1 {
		return dst, fmt.Errorf("%w: %d bytes of properties, at most 65535", ErrEncode, len(m.Properties))
	}
	dst = be.AppendUint32(dst, uint32(batchFixed+len(m.Body)+len(m.Properties)))
	dst = be.AppendUint32(dst, 0)
	dst = be.AppendUint32(dst, 0)
	dst = be.AppendUint32(dst, uint32(m.Flag))
	dst = be.AppendUint32(dst, uint32(len(m.Body)))
	dst = append(dst, m.Body...)
	dst = be.AppendUint16(dst, uint16(len(m.Properties)))
	return append(dst, m.Properties...), nil
}
