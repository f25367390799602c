package message

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math/rand"
	"strconv"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/internal/testseed"
)

// testSeed is the shared seed source (flag -seed, RAFTMQ_SEED, clock).
func testSeed(t testing.TB) int64 { return testseed.Seed(t) }

func unhex(t testing.TB, parts ...string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(parts, ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// goldenMessage is the message of the golden tests.
func goldenMessage() (Message, StoreFields) {
	m := Message{
		Topic: "T1", QueueID: 3, Flag: 0x10, BornTimestamp: 0x0102030405060708,
		BornHost: HostPort{IP: [4]byte{10, 0, 0, 1}, Port: 10911}, ReconsumeTimes: 1,
		Body: []byte("hi"), Properties: []byte("TAGS\x01a\x02"),
	}
	f := StoreFields{QueueOffset: 5, PhysicalOffset: 0x130, StoreTimestamp: 0x1122334455667788,
		StoreHost: HostPort{IP: [4]byte{192, 168, 1, 2}, Port: 10911}}
	return m, f
}

// goldenRecord is the record of goldenMessage, written out field by field.
func goldenRecord(t testing.TB) []byte {
	return unhex(t,
		"00000066",         // TOTALSIZE 102 = 91 + 2 + 2 + 7
		"DAA320A7",         // MAGICCODE v1
		"D8932AAC",         // BODYCRC = crc32("hi") (zlib)
		"00000003",         // QUEUEID
		"00000010",         // FLAG
		"0000000000000005", // QUEUEOFFSET
		"0000000000000130", // PHYSICALOFFSET
		"00000000",         // SYSFLAG
		"0102030405060708", // BORNTIMESTAMP
		"0A00000100002A9F", // BORNHOST 10.0.0.1:10911
		"1122334455667788", // STORETIMESTAMP
		"C0A8010200002A9F", // STOREHOST 192.168.1.2:10911
		"00000001",         // RECONSUMETIMES
		"0000000000000000", // PREPARED TX OFFSET
		"00000002", "6869", // BODYLENGTH, BODY "hi"
		"02", "5431", // TOPICLENGTH, TOPIC "T1"
		"0007", "5441475301610"+"2", // PROPERTIESLENGTH, "TAGS\x01a\x02"
	)
}

func goldenFrame(t testing.TB, crc string) []byte {
	return unhex(t,
		"00000030",         // TOTALSIZE 48
		"DAA32FE0",         // MAGICCODE frame
		"01", "01", "0000", // VERSION, KIND messages, reserved
		"00000096",         // ENTRYSIZE 150 = 48 + 102
		"0000000000000007", // RAFTINDEX
		"0000000000000002", // TERM
		"1122334455667788", // STORETIMESTAMP
		"00000001",         // COUNT
		crc,                // CRC32C
	)
}

func TestGoldenRecord(t *testing.T) {
	m, f := goldenMessage()
	want := goldenRecord(t)
	buf := make([]byte, 200)
	n, err := EncodeRecord(buf, &m, f)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf[:n], want) {
		t.Fatalf("encoded\n%x\nwant\n%x", buf[:n], want)
	}
	r, err := DecodeRecord(want)
	if err != nil {
		t.Fatal(err)
	}
	if r.Size != 102 || string(r.Topic) != "T1" || string(r.Body) != "hi" || r.PhysicalOffset != 0x130 ||
		r.StoreHost != f.StoreHost || r.BornHost != m.BornHost || r.QueueOffset != 5 || r.BodyCRC != 0xD8932AAC {
		t.Fatalf("decoded %+v", r)
	}
}

func TestGoldenFrame(t *testing.T) {
	h := FrameHeader{Size: 48, Kind: KindMessages, EntrySize: 150, RaftIndex: 7, Term: 2,
		StoreTimestamp: 0x1122334455667788, Count: 1, CRC: 0xAABBCCDD}
	buf := make([]byte, FrameSize)
	if err := EncodeFrame(buf, h); err != nil {
		t.Fatal(err)
	}
	if want := goldenFrame(t, "AABBCCDD"); !bytes.Equal(buf, want) {
		t.Fatalf("frame\n%x\nwant\n%x", buf, want)
	}
	got, err := DecodeFrame(buf)
	if err != nil || got != h {
		t.Fatalf("decoded %+v, %v", got, err)
	}
}

func randMessage(rng *rand.Rand) Message {
	const topicChars = "abcXYZ019%|-_"
	topic := make([]byte, 1+rng.Intn(MaxTopicLen))
	for i := range topic {
		topic[i] = topicChars[rng.Intn(len(topicChars))]
	}
	body := make([]byte, rng.Intn(2048))
	rng.Read(body)
	props, _ := EncodeProperties(Property{PropertyTags, "t" + strconv.Itoa(rng.Intn(9))},
		Property{PropertyKeys, "k1 k2"}, Property{PropertyUniqKey, strconv.Itoa(rng.Int())})
	return Message{
		Topic: string(topic), QueueID: rng.Int31n(64), Flag: rng.Int31(), SysFlag: rng.Int31() &^ 0x30,
		BornTimestamp: rng.Int63(), BornHost: HostPort{IP: [4]byte{byte(rng.Int()), 1, 2, 3}, Port: rng.Int31()},
		ReconsumeTimes: rng.Int31n(16), PreparedTxOffset: rng.Int63(), Body: body, Properties: props,
	}
}

func TestRecordRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(testSeed(t)))
	buf := make([]byte, 1<<16)
	for i := 0; i < 2000; i++ {
		m := randMessage(rng)
		f := StoreFields{QueueOffset: rng.Int63(), PhysicalOffset: rng.Int63(), StoreTimestamp: rng.Int63(),
			StoreHost: HostPort{IP: [4]byte{1, 2, 3, byte(i)}, Port: rng.Int31()}}
		if err := ValidateMessage(&m, 0); err != nil {
			t.Fatal(err)
		}
		n, err := EncodeRecord(buf, &m, f)
		if err != nil || n != MessageSize(&m) {
			t.Fatalf("encode: %d, %v", n, err)
		}
		r, err := DecodeRecord(buf) // trailing bytes must be ignored
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		got := Message{Topic: string(r.Topic), QueueID: r.QueueID, Flag: r.Flag, SysFlag: r.SysFlag,
			BornTimestamp: r.BornTimestamp, BornHost: r.BornHost, ReconsumeTimes: r.ReconsumeTimes,
			PreparedTxOffset: r.PreparedTxOffset, Body: r.Body, Properties: r.Properties}
		if !equalMessage(got, m) || r.Size != int32(n) || r.QueueOffset != f.QueueOffset ||
			r.PhysicalOffset != f.PhysicalOffset || r.StoreTimestamp != f.StoreTimestamp || r.StoreHost != f.StoreHost {
			t.Fatalf("round trip %d: got %+v want %+v", i, got, m)
		}
		// Any single bit flip in the record is detected or changes a
		// field (then it still decodes consistently); it never panics.
		bit := rng.Intn(n * 8)
		buf[bit/8] ^= 1 << (bit % 8)
		if _, err := DecodeRecord(buf[:n]); err == nil && bit/8 >= OffBody && bit/8 < OffBody+len(m.Body) {
			t.Fatalf("bit flip %d in the body not detected", bit)
		}
	}
}

func equalMessage(a, b Message) bool {
	return a.Topic == b.Topic && a.QueueID == b.QueueID && a.Flag == b.Flag && a.SysFlag == b.SysFlag &&
		a.BornTimestamp == b.BornTimestamp && a.BornHost == b.BornHost && a.ReconsumeTimes == b.ReconsumeTimes &&
		a.PreparedTxOffset == b.PreparedTxOffset && bytes.Equal(a.Body, b.Body) && bytes.Equal(a.Properties, b.Properties)
}

func TestDecodeRecordRejects(t *testing.T) {
	good := goldenRecord(t)
	mut := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"short", good[:90], ErrShort},
		{"truncated", good[:101], ErrShort},
		{"magic", mut(func(b []byte) []byte { b[4] ^= 1; return b }), ErrBadMagic},
		{"v2 magic", mut(func(b []byte) []byte { be.PutUint32(b[4:], MagicMessageV2); return b }), ErrBadMagic},
		{"size small", mut(func(b []byte) []byte { be.PutUint32(b, 90); return b }), ErrBadSize},
		{"size negative", mut(func(b []byte) []byte { be.PutUint32(b, 0xFFFFFFF0); return b }), ErrBadSize},
		{"size short by one", mut(func(b []byte) []byte { be.PutUint32(b, 101); return b[:101] }), ErrBadLength},
		{"body length", mut(func(b []byte) []byte { be.PutUint32(b[OffBodyLength:], 3); return b }), ErrBadLength},
		{"body length negative", mut(func(b []byte) []byte { be.PutUint32(b[OffBodyLength:], 0x80000000); return b }), ErrBadLength},
		{"topic length zero", mut(func(b []byte) []byte { b[90] = 0; return b }), ErrBadLength},
		{"topic length signed", mut(func(b []byte) []byte { b[90] = 0x82; return b }), ErrBadLength},
		{"props length", mut(func(b []byte) []byte { b[94] = 8; return b }), ErrBadLength},
		{"ipv6 flag", mut(func(b []byte) []byte { b[OffSysFlag+3] = 0x10; return b }), ErrBadLength},
		{"body crc", mut(func(b []byte) []byte { b[OffBody] ^= 0x80; return b }), ErrBodyCRC},
	}
	for _, c := range cases {
		_, err := DecodeRecord(c.b)
		if !errors.Is(err, c.want) || !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
}

func TestDecodeFrameRejects(t *testing.T) {
	good := goldenFrame(t, "00000000")
	mut := func(f func(b []byte)) []byte { b := append([]byte(nil), good...); f(b); return b }
	cases := map[string][]byte{
		"short":          good[:47],
		"magic":          mut(func(b []byte) { b[5] ^= 4 }),
		"version":        mut(func(b []byte) { b[FrameOffVersion] = 2 }),
		"kind 0":         mut(func(b []byte) { b[FrameOffKind] = 0 }),
		"kind 4":         mut(func(b []byte) { b[FrameOffKind] = 4 }),
		"reserved":       mut(func(b []byte) { b[FrameOffReserved+1] = 1 }),
		"size":           mut(func(b []byte) { be.PutUint32(b, 47) }),
		"payload in msg": mut(func(b []byte) { be.PutUint32(b, 52) }),
		"entry < total":  mut(func(b []byte) { be.PutUint32(b[FrameOffEntrySize:], 40) }),
		"count negative": mut(func(b []byte) { be.PutUint32(b[FrameOffCount:], 0xFFFFFFFF) }),
		"count too big":  mut(func(b []byte) { be.PutUint32(b[FrameOffCount:], 2) }),
		"noop records":   mut(func(b []byte) { b[FrameOffKind] = byte(KindNoop) }),
		"command count":  mut(func(b []byte) { b[FrameOffKind] = byte(KindCommand); be.PutUint32(b[FrameOffEntrySize:], 48) }),
	}
	for name, b := range cases {
		if _, err := DecodeFrame(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %v", name, err)
		}
	}
}

func TestValidateMessage(t *testing.T) {
	ok := func() Message { return Message{Topic: "Topic_A-1%x|y", Body: []byte("x")} }
	if m := ok(); ValidateMessage(&m, 0) != nil {
		t.Fatal(ValidateMessage(&m, 0))
	}
	cases := []struct {
		name string
		mod  func(m *Message)
		max  int
		want error
	}{
		{"empty topic", func(m *Message) { m.Topic = "" }, 0, ErrBadTopic},
		{"long topic", func(m *Message) { m.Topic = strings.Repeat("a", 128) }, 0, ErrBadTopic},
		{"space in topic", func(m *Message) { m.Topic = "a b" }, 0, ErrBadTopic},
		{"dot in topic", func(m *Message) { m.Topic = "a.b" }, 0, ErrBadTopic},
		{"unicode topic", func(m *Message) { m.Topic = "tópic" }, 0, ErrBadTopic},
		{"queue id", func(m *Message) { m.QueueID = -1 }, 0, ErrBadQueueID},
		{"body over max", func(m *Message) { m.Body = make([]byte, 11) }, 10, ErrBodyTooLarge},
		{"body over 4MiB", func(m *Message) { m.Body = make([]byte, MaxBodySize+1) }, 1 << 30, ErrBodyTooLarge},
		{"properties", func(m *Message) { m.Properties = make([]byte, MaxPropertiesLen+1) }, 0, ErrPropertiesTooLarge},
		{"ipv6", func(m *Message) { m.SysFlag = SysFlagStoreHostV6 }, 0, ErrBadSysFlag},
	}
	for _, c := range cases {
		m := ok()
		c.mod(&m)
		if err := ValidateMessage(&m, c.max); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v want %v", c.name, err, c.want)
		}
	}
	m := ok()
	m.Topic = strings.Repeat("a", 127)
	m.Body = make([]byte, MaxBodySize)
	m.Properties = make([]byte, MaxPropertiesLen)
	if err := ValidateMessage(&m, 0); err != nil {
		t.Fatalf("limits themselves must pass: %v", err)
	}
}

func TestProperties(t *testing.T) {
	p, err := EncodeProperties(Property{"KEYS", "a b"}, Property{"TAGS", "tagA"}, Property{"UNIQ_KEY", ""})
	if err != nil {
		t.Fatal(err)
	}
	if string(p) != "KEYS\x01a b\x02TAGS\x01tagA\x02UNIQ_KEY\x01\x02" {
		t.Fatalf("%q", p)
	}
	for k, want := range map[string]string{"KEYS": "a b", "TAGS": "tagA", "UNIQ_KEY": ""} {
		if v, ok := GetProperty(p, k); !ok || string(v) != want {
			t.Errorf("%s: %q %v", k, v, ok)
		}
	}
	for _, k := range []string{"KEY", "AGS", "", "a b"} {
		if v, ok := GetProperty(p, k); ok {
			t.Errorf("%q found: %q", k, v)
		}
	}
	if v, ok := GetProperty([]byte("A\x01x\x02B\x01y"), "B"); !ok || string(v) != "y" {
		t.Errorf("unterminated last pair: %q %v", v, ok)
	}
	if n := testing.AllocsPerRun(100, func() { GetProperty(p, "UNIQ_KEY") }); n != 0 {
		t.Errorf("GetProperty allocates %v", n)
	}
	if _, err := EncodeProperties(Property{"K\x01", "v"}); !errors.Is(err, ErrBadProperty) {
		t.Errorf("separator in key: %v", err)
	}
	if _, err := EncodeProperties(Property{"K", "v\x02"}); !errors.Is(err, ErrBadProperty) {
		t.Errorf("separator in value: %v", err)
	}
	mp, _ := EncodePropertiesMap(map[string]string{"TAGS": "t", "KEYS": "k"})
	if string(mp) != "KEYS\x01k\x02TAGS\x01t\x02" {
		t.Errorf("map order: %q", mp)
	}
}

func TestTagsCode(t *testing.T) {
	// Values of Java's String.hashCode.
	cases := map[string]int64{
		"":           0,
		"TagA":       2598919,
		"a":          97,
		"hello":      99162322,
		"TagA||B":    115107675,
		"é":          233,
		"\U0001F600": 1772899, // surrogate pair D83D DE00
	}
	for s, want := range cases {
		if got := TagsCode(s); got != want {
			t.Errorf("TagsCode(%q) = %d, want %d", s, got, want)
		}
		if got := TagsCodeBytes([]byte(s)); got != want {
			t.Errorf("TagsCodeBytes(%q) = %d, want %d", s, got, want)
		}
	}
	long := strings.Repeat("overflow", 10) // Java: 1909198356
	if TagsCode(long) != TagsCodeBytes([]byte(long)) || TagsCode(long) != 1909198356 {
		t.Error("long tag")
	}
}

func TestOffsetMsgID(t *testing.T) {
	host := HostPort{IP: [4]byte{192, 168, 1, 2}, Port: 10911}
	id := OffsetMsgID(host, 0x130)
	if id != "C0A8010200002A9F0000000000000130" {
		t.Fatalf("%s", id)
	}
	h, phy, err := ParseOffsetMsgID(strings.ToLower(id))
	if err != nil || h != host || phy != 0x130 {
		t.Fatalf("%v %d %v", h, phy, err)
	}
	for _, bad := range []string{"", id[:31], id + "0", "G" + id[1:], "C0A8010200002A9F8000000000000130"} {
		if _, _, err := ParseOffsetMsgID(bad); !errors.Is(err, ErrBadMsgID) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// TestAppendRecordReproducesStoredBytes: a decoded record appended again is
// the same bytes, BODYCRC included even when it does not match the body (it
// is copied, not recomputed).
func TestAppendRecordReproducesStoredBytes(t *testing.T) {
	rng := rand.New(rand.NewSource(testSeed(t)))
	buf := make([]byte, 1<<16)
	for i := 0; i < 200; i++ {
		m := randMessage(rng)
		n, err := EncodeRecord(buf, &m, StoreFields{QueueOffset: rng.Int63(), PhysicalOffset: rng.Int63(),
			StoreTimestamp: rng.Int63(), StoreHost: HostPort{IP: [4]byte{1, 2, 3, 4}, Port: rng.Int31()}})
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 1 {
			be.PutUint32(buf[OffBodyCRC:], rng.Uint32())
		}
		r, err := DecodeRecordSkipBodyCRC(buf[:n])
		if err != nil {
			t.Fatal(err)
		}
		prefix := []byte("prefix")
		got := AppendRecord(prefix, &r)
		if !bytes.Equal(got[:len(prefix)], prefix) || !bytes.Equal(got[len(prefix):], buf[:n]) {
			t.Fatalf("record %d: appended bytes differ from the stored ones", i)
		}
	}
}
