package transport

import (
	"reflect"
	"testing"

	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
	"github.com/raftmq/raftmq/store"
)

// toLogMessages (the Send path's batch conversion) equals toLogMessage of
// every message, whatever mix of hosts and properties the batch has.
func TestToLogMessagesEqualsOneByOne(t *testing.T) {
	in := []*pb.Message{
		{Topic: "T", QueueId: 1, Body: []byte("a"), BornHost: "10.0.0.1:5", BornTimestamp: 7,
			Properties: []*pb.Property{{Key: "UNIQ_KEY", Value: "x"}, {Key: "KEYS", Value: "k1 k2"}}},
		{Topic: "T", QueueId: 2, Body: []byte("b"), BornHost: "10.0.0.1:5"},
		{Topic: "U", QueueId: 0, Body: []byte("c"), BornHost: "10.0.0.2:6", Flag: 3,
			Properties: []*pb.Property{{Key: "TAGS", Value: "t"}}},
		{Topic: "U", Body: []byte("d"), BornHost: ""},
		{Topic: "U", Body: []byte("e"), BornHost: "10.0.0.2:6", Properties: []*pb.Property{{Key: "A", Value: ""}}},
	}
	got := toLogMessages(in)
	if len(got) != len(in) {
		t.Fatalf("%d messages for %d", len(got), len(in))
	}
	for i, m := range in {
		if want := toLogMessage(m); !reflect.DeepEqual(got[i], want) {
			t.Fatalf("message %d:\n got %+v\nwant %+v", i, got[i], want)
		}
	}
	// The shared properties buffer must not let one message's append
	// overwrite the next one's properties.
	got[0].Properties = append(got[0].Properties, 'X')
	if want := toLogMessage(in[2]); !reflect.DeepEqual(got[2].Properties, want.Properties) {
		t.Fatalf("properties of message 2 changed to %q", got[2].Properties)
	}
}

func TestFromPutResultsEqualsOneByOne(t *testing.T) {
	rs := []store.PutResult{
		{Topic: "T", QueueID: 1, QueueOffset: 5, PhysicalOffset: 100, MsgID: "m", OffsetMsgID: "o", StoreTimestamp: 9, Size: 3},
		{Topic: "T", Err: store.ErrNoSuchTopic},
	}
	got := fromPutResults(rs)
	for i, r := range rs {
		want := fromPutResult(r)
		if got[i].String() != want.String() {
			t.Fatalf("result %d: got %v want %v", i, got[i], want)
		}
	}
}
