package remoting

import (
	"errors"
	"math/rand"
	"reflect"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/raftmq/raftmq/internal/testseed"
)

// TestParseSendHeader reads the fields as the Go client writes them, in
// the long (SEND_MESSAGE) and short (V2, batch) names.
func TestParseSendHeader(t *testing.T) {
	want := SendHeader{ProducerGroup: "pg", Topic: "T", DefaultTopic: "TBW102", DefaultTopicQueueNums: 4, QueueID: 3,
		SysFlag: 0, BornTimestamp: 1796323304218, Flag: 0, Properties: "UNIQ_KEY\x01abc\x02TAGS\x01t\x02",
		MaxReconsumeTimes: 16, BrokerName: "raftmq"}
	long := map[string]string{"producerGroup": "pg", "topic": "T", "queueId": "3", "sysFlag": "0",
		"bornTimestamp": "1796323304218", "flag": "0", "reconsumeTimes": "0", "unitMode": "false",
		"maxReconsumeTimes": "16", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4", "batch": "false",
		"properties": want.Properties, "bname": "raftmq"}
	got, err := ParseSendHeader(&Command{Code: CodeSendMessage, ExtFields: long})
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("long names: %+v, %v\nwant %+v", got, err, want)
	}
	if !reflect.DeepEqual(want.Fields(false), long) {
		t.Fatalf("Fields(false) = %v\nwant %v", want.Fields(false), long)
	}
	want.Batch = true
	got, err = ParseSendHeader(&Command{Code: CodeSendBatchMessage, ExtFields: want.Fields(true)})
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("short names: %+v, %v\nwant %+v", got, err, want)
	}
	for _, bad := range []map[string]string{
		{"topic": "T", "queueId": "x"},
		{"topic": "T", "queueId": "4294967296"},
		{"topic": "T", "batch": "maybe"},
		{"queueId": "1"},
	} {
		if _, err := ParseSendHeader(&Command{Code: CodeSendMessage, ExtFields: bad}); !errors.Is(err, ErrMalformed) {
			t.Errorf("%v: %v, want ErrMalformed", bad, err)
		}
	}
}

// TestDecodeBatchOfTheGoClient decodes batch bodies the Apache Go client
// builds (primitive.Message.Marshal, one after another), and our own.
func TestDecodeBatchOfTheGoClient(t *testing.T) {
	rng := rand.New(rand.NewSource(testseed.Seed(t)))
	var body, ours []byte
	var want []BatchMessage
	for i := 0; i < 20; i++ {
		b := make([]byte, rng.Intn(2000))
		rng.Read(b)
		m := primitive.NewMessage("T", b).WithTag("tag").WithKeys([]string{"k1", "k2"})
		m.Flag = rng.Int31()
		body = append(body, m.Marshal()...)
		bm := BatchMessage{Flag: m.Flag, Body: b, Properties: []byte(m.MarshallProperties())}
		want = append(want, bm)
		var err error
		if ours, err = AppendBatchMessage(ours, bm); err != nil {
			t.Fatal(err)
		}
	}
	for name, b := range map[string][]byte{"Go client": body, "ours": ours} {
		got, err := DecodeBatch(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d messages, want %d", name, len(got), len(want))
		}
		for i := range got {
			if got[i].Flag != want[i].Flag || string(got[i].Body) != string(want[i].Body) ||
				len(got[i].Properties) != len(want[i].Properties) {
				t.Fatalf("%s: message %d: %+v, want %+v", name, i, got[i], want[i])
			}
		}
	}
	for name, b := range map[string][]byte{
		"empty": nil, "short": body[:10], "cut": body[:len(body)-1],
		"total too small": append(be.AppendUint32(nil, 5), body[4:]...),
		"body beyond":     append(append(append([]byte{}, body[:16]...), 0x7f, 0, 0, 0), body[20:]...),
	} {
		if _, err := DecodeBatch(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}

// FuzzDecodeBatch: any body decodes or fails, never panics; what decodes
// encodes back to the same bytes, apart from the magic and CRC fields.
func FuzzDecodeBatch(f *testing.F) {
	seed, _ := AppendBatchMessage(nil, BatchMessage{Flag: 1, Body: []byte("b"), Properties: []byte("TAGS\x01t\x02")})
	f.Add(seed)
	f.Fuzz(func(t *testing.T, body []byte) {
		msgs, err := DecodeBatch(body)
		if err != nil {
			return
		}
		var again []byte
		for _, m := range msgs {
			if again, err = AppendBatchMessage(again, m); err != nil {
				t.Fatal(err)
			}
		}
		if len(again) != len(body) {
			t.Fatalf("re-encoded %d bytes from %d", len(again), len(body))
		}
		for pos := 0; pos < len(again); {
			total := int(be.Uint32(again[pos:]))
			clear(body[pos+4 : pos+12]) // magic and CRC are not kept
			pos += total
		}
		if string(again) != string(body) {
			t.Fatal("re-encoded bytes differ")
		}
	})
}
