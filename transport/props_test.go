package transport

import (
	"bytes"
	"testing"

	"github.com/raftmq/raftmq/message"
	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
)

func TestPropertiesRoundTrip(t *testing.T) {
	in := []*pb.Property{{Key: message.PropertyUniqKey, Value: "ABC"}, {Key: message.PropertyKeys, Value: "k1 k2"}, {Key: message.PropertyTags, Value: ""}}
	enc := EncodeProperties(in)
	want := []byte("UNIQ_KEY\x01ABC\x02KEYS\x01k1 k2\x02TAGS\x01\x02")
	if !bytes.Equal(enc, want) {
		t.Fatalf("encoded %q, want %q", enc, want)
	}
	out := DecodeProperties(enc)
	if len(out) != 3 || PropertyValue(out, message.PropertyKeys) != "k1 k2" || PropertyValue(out, message.PropertyUniqKey) != "ABC" {
		t.Fatalf("decoded %v", out)
	}
}

// FuzzDecodeProperties: never panics, and re-encoding well-formed output
// decodes to the same properties.
func FuzzDecodeProperties(f *testing.F) {
	f.Add([]byte("UNIQ_KEY\x01ABC\x02KEYS\x01k1 k2\x02"))
	f.Add([]byte("\x01\x02\x02\x01"))
	f.Add([]byte("novalue"))
	f.Fuzz(func(t *testing.T, b []byte) {
		props := DecodeProperties(b)
		again := DecodeProperties(EncodeProperties(props))
		if len(again) != len(props) {
			t.Fatalf("round trip changed count %d -> %d", len(props), len(again))
		}
		for i := range props {
			if props[i].GetKey() != again[i].GetKey() || props[i].GetValue() != again[i].GetValue() {
				t.Fatalf("property %d changed", i)
			}
		}
	})
}

// FuzzValidateMessage: validation never panics, and a message it accepts
// converts to a commitlog message whose properties fit and decode back.
func FuzzValidateMessage(f *testing.F) {
	f.Add("T", int32(0), []byte("body"), "KEYS", "a b", "1.2.3.4:5")
	f.Add("", int32(-1), []byte{}, "", "", "")
	f.Add("a b", int32(4000), []byte{1}, "k\x01", "v\x02", "::1")
	f.Fuzz(func(t *testing.T, topic string, q int32, body []byte, k, v, host string) {
		m := &pb.Message{Topic: topic, QueueId: q, Body: body, BornHost: host,
			Properties: []*pb.Property{{Key: k, Value: v}}}
		if validateMessage(0, m, 1<<20) != nil {
			return
		}
		lm := toLogMessage(m)
		if len(lm.Properties) > message.MaxPropertiesLen {
			t.Fatalf("accepted %d bytes of properties", len(lm.Properties))
		}
		back := DecodeProperties(lm.Properties)
		if len(back) != 1 || back[0].GetKey() != k || back[0].GetValue() != v {
			t.Fatalf("property %q=%q decoded as %v", k, v, back)
		}
	})
}
