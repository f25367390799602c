package broker

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/auth"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/remoting"
)

// testNodeToken is the node_token of testAuthFile.
const testNodeToken = "node-token-of-the-broker-tests-0123456789"

// testAuthFile: app produces and consumes orders in group billing; shipper
// only produces orders; grouponly holds group billing and no topic; temp
// expires at 2030-01-01; gone is revoked; root is an admin.
const testAuthFile = `
node_token = "` + testNodeToken + `"

[[users]]
name = "app"
access_key = "AK-app"
secret_key = "SK-app"
produce = ["orders"]
consume = ["orders"]
groups = ["billing"]

[[users]]
name = "shipper"
access_key = "AK-shipper"
secret_key = "SK-shipper"
produce = ["orders"]

[[users]]
name = "grouponly"
access_key = "AK-grouponly"
secret_key = "SK-grouponly"
groups = ["billing"]

[[users]]
name = "temp"
access_key = "AK-temp"
secret_key = "SK-temp"
produce = ["orders"]
expires = 2030-01-01T00:00:00Z

[[users]]
name = "gone"
access_key = "AK-gone"
secret_key = "SK-gone"
produce = ["*"]
revoked = true

[[users]]
name = "root"
access_key = "AK-root"
secret_key = "SK-root"
admin = true
`

// beforeExpiry is an hour before temp expires.
var beforeExpiry = time.Date(2029, 12, 31, 23, 0, 0, 0, time.UTC)

// openAuth writes an auth file into a temporary directory and opens it
// with clock now; it returns the file's path too, for rewrites.
func openAuth(t testing.TB, content string, now func() time.Time) (*auth.Authenticator, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "auth.toml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := auth.Open(path, now)
	if err != nil {
		t.Fatal(err)
	}
	return a, path
}

func withAuth(a *auth.Authenticator) func(*Options) {
	return func(o *Options) { o.Auth = a }
}

// sign adds AccessKey and Signature to req as RocketMQ's Go client does
// (internal/remote/interceptor.go), written out here rather than taken
// from package auth: the values of AccessKey and every ext field in the
// order of their sorted keys, then the body, HMAC-SHA1 with the secret
// key, Base64.
func sign(req *remoting.Command, ak, sk string) *remoting.Command {
	if req.ExtFields == nil {
		req.ExtFields = map[string]string{}
	}
	delete(req.ExtFields, "Signature")
	req.ExtFields["AccessKey"] = ak
	keys := make([]string, 0, len(req.ExtFields))
	for k := range req.ExtFields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	mac := hmac.New(sha1.New, []byte(sk))
	for _, k := range keys {
		mac.Write([]byte(req.ExtFields[k]))
	}
	mac.Write(req.Body)
	req.ExtFields["Signature"] = base64.StdEncoding.EncodeToString(mac.Sum(nil))
	return req
}

// as signs req with user's credentials from testAuthFile (AK-user, SK-user).
func as(user string, req *remoting.Command) *remoting.Command {
	return sign(req, "AK-"+user, "SK-"+user)
}

func sendTo(topic, body string) *remoting.Command {
	return sendRequest(remoting.CodeSendMessageV2, remoting.SendHeader{ProducerGroup: "pg", Topic: topic, BornTimestamp: 1}, []byte(body))
}

func fieldsCmd(code int16, kv ...string) *remoting.Command {
	f := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		f[kv[i]] = kv[i+1]
	}
	return &remoting.Command{Code: code, ExtFields: f}
}

// expect fails unless resp has code want and a remark holding each of has.
func expect(t *testing.T, what string, resp *remoting.Command, want int16, has ...string) {
	t.Helper()
	if resp.Code != want {
		t.Errorf("%s: answer %d (%q), want %d", what, resp.Code, resp.Remark, want)
		return
	}
	for _, h := range has {
		if !strings.Contains(resp.Remark, h) {
			t.Errorf("%s: remark %q does not say %q", what, resp.Remark, h)
		}
	}
}

// TestACLAuthentication: with Auth set, a request signed as RocketMQ's
// clients sign (JSON or ROCKETMQ header, with an unsigned SecurityToken)
// is served; a wrong secret, an unknown AccessKey, no signature, no
// credential at all, a field or the body changed after signing, a revoked
// user, a user past its expiry and one revoked by a reload of the file are
// refused NO_PERMISSION "not authenticated", store nothing and are counted.
// The name-server address stays open.
func TestACLAuthentication(t *testing.T) {
	clock := &fakeClock{now: beforeExpiry}
	a, path := openAuth(t, testAuthFile, clock.Now)
	be := newStoreBackend(t)
	be.brokers = Brokers{Leader: "127.0.0.1:10911"}
	s := serve(t, be, withAuth(a))
	stored := 0
	ok := func(what string, req *remoting.Command) {
		t.Helper()
		expect(t, what, invoke(t, s.brokerClient, req), remoting.CodeSuccess)
		stored++
	}
	refused := func(what string, req *remoting.Command, has ...string) {
		t.Helper()
		expect(t, what, invoke(t, s.brokerClient, req), remoting.CodeNoPermission, append([]string{"not authenticated"}, has...)...)
	}

	ok("signed", as("app", sendTo("orders", "one")))
	binary := as("app", sendTo("orders", "two"))
	binary.Serialize = remoting.SerializeRocketMQ
	ok("signed, ROCKETMQ header", binary)
	withToken := as("app", sendTo("orders", "three"))
	withToken.ExtFields["SecurityToken"] = "sts-token"
	ok("signed, with a SecurityToken", withToken)
	ok("signed by a user before its expiry", as("temp", sendTo("orders", "four")))

	refused("wrong secret", sign(sendTo("orders", "x"), "AK-app", "SK-shipper"), "signature does not match", "AK-app")
	refused("unknown AccessKey", sign(sendTo("orders", "x"), "AK-nobody", "SK-nobody"), "unknown AccessKey")
	noSig := sendTo("orders", "x")
	noSig.ExtFields["AccessKey"] = "AK-app"
	refused("AccessKey without Signature", noSig, "no AccessKey and Signature")
	refused("no credential", sendTo("orders", "x"), "no AccessKey and Signature")
	refused("no fields at all", &remoting.Command{Code: remoting.CodeSendMessageV2})
	changed := as("app", sendTo("orders", "x"))
	changed.ExtFields["e"] = "3" // another queue than signed
	refused("field changed after signing", changed, "signature does not match")
	tampered := as("app", sendTo("orders", "x"))
	tampered.Body = []byte("y")
	refused("body changed after signing", tampered, "signature does not match")
	refused("revoked user", as("gone", sendTo("orders", "x")), "revoked", "gone")
	clock.advance(2 * time.Hour)
	refused("expired user", as("temp", sendTo("orders", "x")), "expired", "temp")
	refused("route unsigned", routeRequest("orders"))

	revoked := strings.Replace(testAuthFile, "groups = [\"billing\"]\n", "groups = [\"billing\"]\nrevoked = true\n", 1)
	if err := os.WriteFile(path, []byte(revoked), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	refused("user revoked by a reload", as("app", sendTo("orders", "x")), "revoked", "app")

	if resp := invoke(t, s.nsClient, routeRequest("orders")); resp.Code != remoting.CodeSuccess {
		t.Fatalf("unsigned route on the name-server address: %d (%s)", resp.Code, resp.Remark)
	}
	if n := be.st.Stats().Messages; n != uint64(stored) {
		t.Fatalf("the store holds %d messages; %d sends were admitted", n, stored)
	}
	if st := s.b.Stats(); st.Denied != 11 || st.Unauthenticated != 11 || st.Failed != 11 || st.Sends != uint64(stored) {
		t.Fatalf("stats %+v: want 11 denied, all unauthenticated and failed, %d sends", st, stored)
	}
}

// TestACLRoles: each code needs its roles. A produce-only user sends to
// its topic and not to others, and cannot pull, query or commit offsets,
// read queue offsets, join or list a consumer group (a producer's
// heartbeat and routes need only a credential), and what it was refused
// changed nothing. A consumer pulls and commits in its group and not in
// another, and sends to and reads its group's retry topic without a grant
// on it; a send back needs the group and the right to read the message
// sent back. Malformed requests are answered as without ACL, unknown codes
// REQUEST_CODE_NOT_SUPPORTED.
func TestACLRoles(t *testing.T) {
	a, _ := openAuth(t, testAuthFile, func() time.Time { return beforeExpiry })
	be := newStoreBackend(t)
	be.brokers = Brokers{Leader: "127.0.0.1:10911"}
	s := serve(t, be, withAuth(a))
	denied := 0
	check := func(what string, req *remoting.Command, want int16, has ...string) *remoting.Command {
		t.Helper()
		resp := invoke(t, s.brokerClient, req)
		expect(t, what, resp, want, has...)
		if want == remoting.CodeNoPermission {
			denied++
		}
		return resp
	}
	const no = remoting.CodeNoPermission
	pull := func(topic, group string) *remoting.Command {
		return pullRequestCmd(topic, 0, 0, map[string]string{"consumerGroup": group})
	}
	update := func(group string) *remoting.Command {
		return fieldsCmd(remoting.CodeUpdateConsumerOffset, "consumerGroup", group, "topic", "orders", "queueId", "0", "commitOffset", "1")
	}
	query := fieldsCmd(remoting.CodeQueryConsumerOffset, "consumerGroup", "billing", "topic", "orders", "queueId", "0")
	producerBeat := &remoting.Command{Code: remoting.CodeHeartbeat, Body: []byte(`{"clientID":"p1","producerDataSet":[{"groupName":"pg"}]}`)}

	sent := check("shipper sends to orders", as("shipper", sendTo("orders", "first")), remoting.CodeSuccess)
	check("shipper sends elsewhere", as("shipper", sendTo("invoices", "x")), no, `shipper may not produce "invoices"`)
	check("shipper pulls", as("shipper", pull("orders", "billing")), no, "PULL_MESSAGE refused", `shipper may not consume "orders"`)
	check("shipper commits an offset", as("shipper", update("billing")), no, "UPDATE_CONSUMER_OFFSET refused", "shipper")
	check("shipper queries an offset", as("shipper", query), no, "shipper")
	check("shipper reads the max offset", as("shipper", fieldsCmd(remoting.CodeGetMaxOffset, "topic", "orders", "queueId", "0")), no, "shipper")
	check("shipper joins a group", as("shipper", heartbeatCmd(t, "c-shipper", "billing")), no, `shipper may not group "billing"`)
	check("shipper lists a group", as("shipper", fieldsCmd(remoting.CodeGetConsumerListByGroup, "consumerGroup", "billing")), no, "shipper")
	check("shipper unregisters from a group", as("shipper", fieldsCmd(remoting.CodeUnregisterClient, "consumerGroup", "billing", "clientID", "c")), no, "shipper")
	check("shipper's producer heartbeat", as("shipper", producerBeat), remoting.CodeSuccess)
	check("shipper unregisters its producer", as("shipper", fieldsCmd(remoting.CodeUnregisterClient, "producerGroup", "pg", "clientID", "p1")), remoting.CodeSuccess)
	check("shipper's route lookup", as("shipper", routeRequest("orders")), remoting.CodeSuccess)
	check("nothing was committed for shipper", as("app", query), remoting.CodeQueryNotFound)

	check("app pulls in billing", as("app", pull("orders", "billing")), remoting.CodeSuccess)
	check("app pulls in audit", as("app", pull("orders", "audit")), no, `app may not group "audit"`)
	check("app commits in billing", as("app", update("billing")), remoting.CodeSuccess)
	check("app commits in audit", as("app", update("audit")), no, `app may not group "audit"`)
	if resp := check("app queries", as("app", query), remoting.CodeSuccess); resp.Field("offset") != "1" {
		t.Fatalf("committed offset %q, want 1", resp.Field("offset"))
	}
	check("app joins billing", as("app", heartbeatCmd(t, "c-app", "billing")), remoting.CodeSuccess)
	check("app joins billing and audit", as("app", heartbeatCmd(t, "c-app", "billing", "audit")), no, `app may not group "audit"`)
	check("app lists billing", as("app", fieldsCmd(remoting.CodeGetConsumerListByGroup, "consumerGroup", " billing ")), remoting.CodeSuccess)
	check("app sends to its retry topic", as("app", sendTo("%RETRY%billing", "retry")), remoting.CodeSuccess)
	check("app sends to its dead-letter topic", as("app", sendTo("%DLQ%billing", "dead")), remoting.CodeSuccess)
	check("app sends to another group's retry topic", as("app", sendTo("%RETRY%audit", "x")), no, `app may not produce "%RETRY%audit"`)
	check("grouponly pulls billing's retry topic", as("grouponly", pull("%RETRY%billing", "billing")), remoting.CodeSuccess)
	check("grouponly pulls orders", as("grouponly", pull("orders", "billing")), no, `grouponly may not consume "orders"`)

	_, phy, err := message.ParseOffsetMsgID(sent.Field("msgId"))
	if err != nil {
		t.Fatal(err)
	}
	sendBack := func(group string) *remoting.Command {
		return fieldsCmd(remoting.CodeConsumerSendMsgBack, "group", group, "offset", strconv.FormatInt(phy, 10), "delayLevel", "1",
			"originTopic", "orders", "originMsgId", sent.Field("msgId"), "maxReconsumeTimes", "16")
	}
	check("grouponly sends back a message of orders", as("grouponly", sendBack("billing")), no,
		"CONSUMER_SEND_MSG_BACK refused", `grouponly may not consume "orders"`)
	check("app sends back to audit", as("app", sendBack("audit")), no, `app may not group "audit"`)
	check("app sends back to billing", as("app", sendBack("billing")), remoting.CodeSuccess)
	if n := be.deliver(t, time.Now().Add(2*time.Second)); n != 1 { // its 1 s delay level
		t.Fatalf("delivered %d sent-back messages, want 1", n)
	}
	if msgs := readQueue(t, be.st, "%RETRY%billing", 0); len(msgs) != 2 || string(msgs[1].Body) != "first" {
		t.Fatalf("the retry topic holds %d messages after one send and one send back", len(msgs))
	}

	check("root pulls anything", as("root", pull("%DLQ%billing", "anyone")), remoting.CodeSuccess)
	check("unknown code", as("app", &remoting.Command{Code: 9999}), remoting.CodeRequestNotSupported)
	bad := as("app", sendTo("orders", "x"))
	bad.ExtFields["e"] = "zero"
	check("unparsable send header", as("app", bad), remoting.CodeMessageIllegal)
	check("unparsable heartbeat", as("app", &remoting.Command{Code: remoting.CodeHeartbeat, Body: []byte("{")}), remoting.CodeSystemError)

	if st := s.b.Stats(); st.Denied != uint64(denied) || st.Unauthenticated != 0 {
		t.Fatalf("stats %+v: want %d denied, none unauthenticated", st, denied)
	}
	if msgs := readQueue(t, be.st, "orders", 0); len(msgs) != 1 {
		t.Fatalf("orders/0 holds %d messages, want shipper's one", len(msgs))
	}
}

// TestACLRelay: a follower authorizes the client, then relays with the
// node token, which the leader admits instead of the client's signature
// (which the relay mark broke); a follower refuses what the client may not
// do without relaying it. A request marked relayed that carries no node
// token, or a wrong one, is refused by the leader even when signed; with
// the token and no signature it is served. A follower whose auth file has
// another node token cannot relay. Routes relayed from the open name
// server carry the token too.
func TestACLRelay(t *testing.T) {
	now := func() time.Time { return beforeExpiry }
	leaderAuth, _ := openAuth(t, testAuthFile, now)
	followerAuth, _ := openAuth(t, testAuthFile, now)
	leaderBE, followerBE := newStoreBackend(t), newStoreBackend(t)
	leader := serve(t, leaderBE, withAuth(leaderAuth))
	followerBE.leader = false
	followerBE.brokers = Brokers{Leader: leader.brokerAddr}
	follower := serve(t, followerBE, withAuth(followerAuth))

	expect(t, "send through the follower", invoke(t, follower.brokerClient, as("app", sendTo("orders", "relayed"))), remoting.CodeSuccess)
	expect(t, "offset commit through the follower", invoke(t, follower.brokerClient,
		as("app", fieldsCmd(remoting.CodeUpdateConsumerOffset, "consumerGroup", "billing", "topic", "orders", "queueId", "0", "commitOffset", "1"))),
		remoting.CodeSuccess)
	if msgs := readQueue(t, leaderBE.st, "orders", 0); len(msgs) != 1 || string(msgs[0].Body) != "relayed" {
		t.Fatalf("the leader holds %d messages after the relay", len(msgs))
	}
	if off, ok := leaderBE.st.ConsumerOffset("billing", "orders", 0); !ok || off != 1 {
		t.Fatalf("the leader's offset of billing: %d, %v", off, ok)
	}
	if f, l := follower.b.Stats(), leader.b.Stats(); f.Relayed != 2 || l.Denied != 0 || l.Sends != 1 {
		t.Fatalf("follower relayed %d; leader denied %d, stored %d sends", f.Relayed, l.Denied, l.Sends)
	}

	leaderRequests := leader.b.Stats().Requests
	expect(t, "unauthorized send at the follower", invoke(t, follower.brokerClient, as("shipper", sendTo("invoices", "x"))),
		remoting.CodeNoPermission, `shipper may not produce "invoices"`)
	expect(t, "unsigned send at the follower", invoke(t, follower.brokerClient, sendTo("orders", "x")),
		remoting.CodeNoPermission, "not authenticated")
	if f, l := follower.b.Stats(), leader.b.Stats(); f.Relayed != 2 || f.Denied != 2 || l.Requests != leaderRequests {
		t.Fatalf("refused requests reached the leader: follower relayed %d, denied %d; leader saw %d requests, had %d",
			f.Relayed, f.Denied, l.Requests, leaderRequests)
	}

	marked := func(token string) *remoting.Command {
		req := sendTo("orders", "marked")
		req.ExtFields[relayedField] = "1"
		if token != "" {
			req.ExtFields[nodeTokenField] = token
		}
		return req
	}
	expect(t, "marked relayed without a node token", invoke(t, leader.brokerClient, as("app", marked(""))),
		remoting.CodeNoPermission, "not authenticated", "node token")
	expect(t, "marked relayed with a wrong node token", invoke(t, leader.brokerClient, as("app", marked(testNodeToken+"x"))),
		remoting.CodeNoPermission, "not authenticated", "node token")
	expect(t, "marked relayed with the node token", invoke(t, leader.brokerClient, marked(testNodeToken)), remoting.CodeSuccess)

	strangerAuth, _ := openAuth(t, strings.Replace(testAuthFile, testNodeToken, "another-clusters-node-token-0123456789", 1), now)
	strangerBE := newStoreBackend(t)
	strangerBE.leader = false
	strangerBE.brokers = Brokers{Leader: leader.brokerAddr}
	stranger := serve(t, strangerBE, withAuth(strangerAuth))
	expect(t, "send relayed with another node token", invoke(t, stranger.brokerClient, as("app", sendTo("orders", "x"))),
		remoting.CodeNoPermission, "node token")

	leaderBE.mu.Lock()
	leaderBE.brokers = Brokers{Leader: leader.brokerAddr}
	leaderBE.mu.Unlock()
	relayed := follower.b.Stats().Relayed
	if resp := invoke(t, follower.nsClient, routeRequest("orders")); resp.Code != remoting.CodeSuccess || follower.b.Stats().Relayed != relayed+1 {
		t.Fatalf("route of a topic only the leader holds, from the follower's name server: %d (%s)", resp.Code, resp.Remark)
	}
	if n := len(readQueue(t, leaderBE.st, "orders", 0)); n != 2 {
		t.Fatalf("the leader holds %d messages, want the relayed and the marked one", n)
	}
}
