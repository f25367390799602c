package remoting

import "fmt"

// Serialize is how a frame's header is encoded.
type Serialize uint8

const (
	// SerializeJSON is the JSON header (what the Go client sends).
	SerializeJSON Serialize = 0
	// SerializeRocketMQ is the binary header (the Java client's option).
	SerializeRocketMQ Serialize = 1
)

func (s Serialize) String() string {
	switch s {
	case SerializeJSON:
		return "JSON"
	case SerializeRocketMQ:
		return "ROCKETMQ"
	}
	return fmt.Sprintf("Serialize(%d)", uint8(s))
}

// Flag bits.
const (
	FlagResponse int32 = 1 << 0
	FlagOneway   int32 = 1 << 1
)

// LanguageJava is the language code (and name) this package writes into
// the headers it encodes, as a Java broker does.
const LanguageJava uint8 = 0

// languages are the names of RocketMQ's LanguageCode values, by code.
var languages = []string{"JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP", "OMS", "RUST"}

// languageName is the JSON name of code, "OTHER" for codes it does not know.
func languageName(code uint8) string {
	if int(code) < len(languages) {
		return languages[code]
	}
	return "OTHER"
}

// languageCode is the code of a JSON language name, OTHER's for names it
// does not know.
func languageCode(name string) uint8 {
	for i, n := range languages {
		if n == name {
			return uint8(i)
		}
	}
	return 7
}

// Command is one request or response. ExtFields carries the request's or
// response's custom header; Body its payload.
type Command struct {
	Code      int16
	Language  uint8
	Version   int16
	Opaque    int32
	Flag      int32
	Remark    string
	ExtFields map[string]string
	Body      []byte
	// Serialize is the header encoding the command arrived in, or is to be
	// sent in.
	Serialize Serialize
}

// IsResponse reports whether the command is a response.
func (c *Command) IsResponse() bool { return c.Flag&FlagResponse != 0 }

// IsOneway reports whether the command is a request that wants no answer.
func (c *Command) IsOneway() bool { return c.Flag&FlagOneway != 0 }

// Field is ExtFields[key] ("" when absent).
func (c *Command) Field(key string) string { return c.ExtFields[key] }

// Response returns an answer to c with code and remark: c's opaque, the
// response flag, c's serialize type and empty ext fields.
func (c *Command) Response(code int16, remark string) *Command {
	return &Command{Code: code, Language: LanguageJava, Version: c.Version, Opaque: c.Opaque, Flag: FlagResponse,
		Remark: remark, ExtFields: map[string]string{}, Serialize: c.Serialize}
}

// NotSupported answers a request whose code this server does not serve.
func (c *Command) NotSupported() *Command {
	return c.Response(CodeRequestNotSupported, fmt.Sprintf("request code %d not supported", c.Code))
}

func (c *Command) String() string {
	kind := "request"
	if c.IsResponse() {
		kind = "response"
	}
	return fmt.Sprintf("%s code=%d opaque=%d flag=%d remark=%q fields=%d body=%dB (%v)",
		kind, c.Code, c.Opaque, c.Flag, c.Remark, len(c.ExtFields), len(c.Body), c.Serialize)
}
