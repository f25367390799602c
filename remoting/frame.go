package remoting

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Errors of decoding.
var (
	// ErrMalformed is wrapped by every error about bytes that are not a
	// command.
	ErrMalformed = errors.New("remoting: malformed command")
	// ErrFrameTooLarge is returned for a frame above the reader's limit.
	ErrFrameTooLarge = errors.New("remoting: frame too large")
	// ErrEncode is wrapped by every error of AppendFrame: the command cannot
	// be put in a frame (unknown serialize type, header or frame too large).
	ErrEncode = errors.New("remoting: cannot encode")
)

// DefaultMaxFrame bounds a frame's length (its int32 prefix) by default:
// RocketMQ's 4 MiB message body limit, batches and headers fit.
const DefaultMaxFrame = 16 << 20

// maxHeader is the largest header the 24-bit length can say.
const maxHeader = 1<<24 - 1

var be = binary.BigEndian

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// AppendFrame appends c as a whole frame (length prefix included), its
// header encoded per c.Serialize.
func AppendFrame(dst []byte, c *Command) ([]byte, error) {
	var header []byte
	var err error
	switch c.Serialize {
	case SerializeJSON:
		header, err = encodeJSONHeader(c)
	case SerializeRocketMQ:
		header = appendBinaryHeader(nil, c)
	default:
		return dst, fmt.Errorf("%w: unknown serialize type %d", ErrEncode, c.Serialize)
	}
	if err != nil {
		return dst, fmt.Errorf("%w: %w", ErrEncode, err)
	}
	if len(header) > maxHeader {
		return dst, fmt.Errorf("%w: header of %d bytes exceeds %d", ErrEncode, len(header), maxHeader)
	}
	length := 4 + len(header) + len(c.Body)
	if length > 1<<31-1 {
		return dst, fmt.Errorf("%w: frame of %d bytes", ErrEncode, length)
	}
	dst = be.AppendUint32(dst, uint32(length))
	dst = be.AppendUint32(dst, uint32(c.Serialize)<<24|uint32(len(header)))
	dst = append(dst, header...)
	return append(dst, c.Body...), nil
}

// DecodeFrame decodes the bytes of one frame after its length prefix (the
// serialize byte, header length, header and body). The command's Body
// aliases payload.
func DecodeFrame(payload []byte) (*Command, error) {
	if len(payload) < 4 {
		return nil, malformed("frame of %d bytes has no header length", len(payload))
	}
	word := be.Uint32(payload)
	ser, hlen := Serialize(word>>24), int(word&maxHeader)
	if hlen > len(payload)-4 {
		return nil, malformed("header length %d exceeds the %d bytes left", hlen, len(payload)-4)
	}
	header, body := payload[4:4+hlen], payload[4+hlen:]
	var c *Command
	var err error
	switch ser {
	case SerializeJSON:
		c, err = decodeJSONHeader(header)
	case SerializeRocketMQ:
		c, err = decodeBinaryHeader(header)
	default:
		return nil, malformed("unknown serialize type %d", ser)
	}
	if err != nil {
		return nil, err
	}
	c.Serialize = ser
	if len(body) > 0 {
		c.Body = body
	}
	return c, nil
}

// ReadCommand reads one frame from r and decodes it. A length below 4 or
// above maxFrame is refused before the rest is read (the stream cannot be
// framed after that). io.EOF means r ended cleanly between frames.
func ReadCommand(r io.Reader, maxFrame int) (*Command, error) {
	var prefix [4]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return nil, err
	}
	length := int64(int32(be.Uint32(prefix[:])))
	switch {
	case length < 4:
		return nil, malformed("frame length %d", length)
	case length > int64(maxFrame):
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", ErrFrameTooLarge, length, maxFrame)
	}
	payload := make([]byte, length)
	if _, err := io.ReadFull(r, payload); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("remoting: read frame body: %w", err)
	}
	return DecodeFrame(payload)
}

// jsonHeader is the JSON header's shape.
type jsonHeader struct {
	Code      int16             `json:"code"`
	Language  json.RawMessage   `json:"language,omitempty"`
	Version   int16             `json:"version"`
	Opaque    int32             `json:"opaque"`
	Flag      int32             `json:"flag"`
	Remark    string            `json:"remark,omitempty"`
	ExtFields map[string]string `json:"extFields"`
}

func encodeJSONHeader(c *Command) ([]byte, error) {
	lang, err := json.Marshal(languageName(c.Language))
	if err != nil {
		return nil, err
	}
	ext := c.ExtFields
	if ext == nil {
		ext = map[string]string{}
	}
	return json.Marshal(jsonHeader{Code: c.Code, Language: lang, Version: c.Version, Opaque: c.Opaque,
		Flag: c.Flag, Remark: c.Remark, ExtFields: ext})
}

func decodeJSONHeader(b []byte) (*Command, error) {
	var h jsonHeader
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, malformed("JSON header: %v", err)
	}
	c := &Command{Code: h.Code, Version: h.Version, Opaque: h.Opaque, Flag: h.Flag, Remark: h.Remark, ExtFields: h.ExtFields}
	if c.ExtFields == nil {
		c.ExtFields = map[string]string{}
	}
	if len(h.Language) > 0 {
		var name string
		if json.Unmarshal(h.Language, &name) == nil {
			c.Language = languageCode(name)
		} else if n, err := strconv.ParseUint(string(h.Language), 10, 8); err == nil {
			c.Language = uint8(n)
		} else {
			return nil, malformed("JSON header: language %s", h.Language)
		}
	}
	return c, nil
}

// binaryFixed is the ROCKETMQ header's size without remark and fields.
const binaryFixed = 2 + 1 + 2 + 4 + 4 + 4 + 4

func appendBinaryHeader(dst []byte, c *Command) []byte {
	dst = be.AppendUint16(dst, uint16(c.Code))
	dst = append(dst, c.Language)
	dst = be.AppendUint16(dst, uint16(c.Version))
	dst = be.AppendUint32(dst, uint32(c.Opaque))
	dst = be.AppendUint32(dst, uint32(c.Flag))
	dst = be.AppendUint32(dst, uint32(len(c.Remark)))
	dst = append(dst, c.Remark...)
	lenAt := len(dst)
	dst = be.AppendUint32(dst, 0)
	for _, k := range sortedKeys(c.ExtFields) {
		v := c.ExtFields[k]
		dst = be.AppendUint16(dst, uint16(len(k)))
		dst = append(dst, k...)
		dst = be.AppendUint32(dst, uint32(len(v)))
		dst = append(dst, v...)
	}
	be.PutUint32(dst[lenAt:], uint32(len(dst)-lenAt-4))
	return dst
}

// cursor reads a binary header front to back; the first short read sets
// err and every later read returns zero values.
type cursor struct {
	b   []byte
	err error
}

func (r *cursor) take(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.err = malformed("ROCKETMQ header: %s of %d bytes, %d left", what, n, len(r.b))
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *cursor) u8(what string) uint8 {
	if b := r.take(1, what); b != nil {
		return b[0]
	}
	return 0
}

func (r *cursor) u16(what string) uint16 {
	if b := r.take(2, what); b != nil {
		return be.Uint16(b)
	}
	return 0
}

func (r *cursor) u32(what string) uint32 {
	if b := r.take(4, what); b != nil {
		return be.Uint32(b)
	}
	return 0
}

// str reads a string whose length was read as n (negative: malformed).
func (r *cursor) str(n int64, what string) string {
	if n > int64(len(r.b)) {
		n = -1 // more than is left: take reports it
	}
	return string(r.take(int(n), what))
}

func decodeBinaryHeader(b []byte) (*Command, error) {
	if len(b) < binaryFixed {
		return nil, malformed("ROCKETMQ header of %d bytes, at least %d", len(b), binaryFixed)
	}
	r := &cursor{b: b}
	c := &Command{ExtFields: map[string]string{}}
	c.Code = int16(r.u16("code"))
	c.Language = r.u8("language")
	c.Version = int16(r.u16("version"))
	c.Opaque = int32(r.u32("opaque"))
	c.Flag = int32(r.u32("flag"))
	c.Remark = r.str(int64(int32(r.u32("remark length"))), "remark")
	fields := &cursor{b: r.take(int(int32(r.u32("extFields length"))), "extFields")}
	if r.err != nil {
		return nil, r.err
	}
	if len(r.b) != 0 {
		return nil, malformed("ROCKETMQ header: %d bytes after the extFields", len(r.b))
	}
	for len(fields.b) > 0 && fields.err == nil {
		k := fields.str(int64(int16(fields.u16("key length"))), "key")
		v := fields.str(int64(int32(fields.u32("value length"))), "value")
		if fields.err == nil {
			c.ExtFields[k] = v
		}
	}
	if fields.err != nil {
		return nil, fields.err
	}
	return c, nil
}
