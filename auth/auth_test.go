package auth

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

const nodeTok = "node-secret-0123456789"

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "auth.toml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func policyFile(producer, consumer string) string {
	return `node_token = "` + nodeTok + `"

[[users]]
name = "ops"
token_sha256 = "` + HashToken("admin-token") + `"
admin = true

[[users]]
name = "orders-producer"
token_sha256 = "` + HashToken(producer) + `"
expires = 2027-01-01T00:00:00Z
produce = ["orders", "orders-*"]

[[users]]
name = "billing"
token_sha256 = "` + HashToken(consumer) + `"
cert_cn = "billing.internal"
access_key = "AK-billing"
secret_key = "SK-billing"
consume = ["orders*"]
groups = ["billing"]
`
}

func clock(t time.Time) func() time.Time { return func() time.Time { return t } }

func TestRolesOnPatterns(t *testing.T) {
	a, err := Open(writeFile(t, policyFile("p-token", "c-token")), clock(time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)))
	if err != nil {
		t.Fatal(err)
	}
	prod, err := a.Token("p-token")
	if err != nil {
		t.Fatal(err)
	}
	cons, err := a.Cert("billing.internal")
	if err != nil {
		t.Fatal(err)
	}
	admin, err := a.Token("admin-token")
	if err != nil {
		t.Fatal(err)
	}
	node, err := a.Token(nodeTok)
	if err != nil || !node.Node {
		t.Fatalf("node token: %v %+v", err, node)
	}
	cases := []struct {
		p        *Principal
		role     Role
		resource string
		want     bool
	}{
		{prod, Produce, "orders", true},
		{prod, Produce, "orders-eu", true},
		{prod, Produce, "ordersx", false},
		{prod, Consume, "orders", false},
		{prod, Group, "billing", false},
		{prod, Admin, "", false},
		{prod, Read, "", true},
		{cons, Consume, "orders-eu", true},
		{cons, Produce, "orders", false},
		{cons, Group, "billing", true},
		{cons, Group, "billing2", false},
		{cons, Admin, "", false},
		{admin, Admin, "", true},
		{admin, Produce, "anything", true},
		{node, Admin, "", true},
		{nil, Read, "", false},
	}
	for _, c := range cases {
		if got := c.p.Allowed(c.role, c.resource); got != c.want {
			name := "nil"
			if c.p != nil {
				name = c.p.Name
			}
			t.Errorf("%s %s %q: %v, want %v", name, c.role, c.resource, got, c.want)
		}
		if err := c.p.Check(c.role, c.resource); (err == nil) != c.want || (err != nil && !errors.Is(err, ErrDenied)) {
			t.Errorf("Check %s %q: %v", c.role, c.resource, err)
		}
	}
	if err := prod.Check(Consume, "orders"); !strings.Contains(err.Error(), `orders-producer may not consume "orders"`) {
		t.Errorf("refusal does not say who and what: %v", err)
	}
}

func TestUnknownExpiredRevoked(t *testing.T) {
	now := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	path := writeFile(t, policyFile("p-token", "c-token"))
	a, err := Open(path, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{"", "nope", HashToken("p-token")} {
		if _, err := a.Token(tok); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("token %q: %v", tok, err)
		}
	}
	if _, err := a.Cert("someone"); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("unknown certificate: %v", err)
	}
	now = time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := a.Token("p-token"); !errors.Is(err, ErrExpired) {
		t.Errorf("expired token: %v", err)
	}
	if _, err := a.Token("c-token"); err != nil {
		t.Errorf("a token without expiry: %v", err)
	}
	// Revoke billing and reload.
	body := strings.Replace(policyFile("p-token", "c-token"), `name = "billing"`, "name = \"billing\"\nrevoked = true", 1)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	for _, try := range []func() (*Principal, error){
		func() (*Principal, error) { return a.Token("c-token") },
		func() (*Principal, error) { return a.Cert("billing.internal") },
	} {
		if _, err := try(); !errors.Is(err, ErrRevoked) {
			t.Errorf("revoked: %v", err)
		}
	}
	// A broken file keeps the policy in force.
	if err := os.WriteFile(path, []byte("users = 3"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(); !errors.Is(err, ErrBadFile) {
		t.Fatalf("broken file: %v", err)
	}
	if _, err := a.Token("c-token"); !errors.Is(err, ErrRevoked) {
		t.Errorf("after a failed reload: %v", err)
	}
}

// clientSignature is rocketmq-client-go's ACL interceptor's computation
// (a string of the AccessKey and every extension field's value in key
// order, then the body), written independently of Sign.
func clientSignature(ak, sk string, ext map[string]string, body []byte) string {
	m := map[string]string{"AccessKey": ak}
	order := []string{"AccessKey"}
	for k, v := range ext {
		m[k] = v
		order = append(order, k)
	}
	sort.Strings(order)
	content := ""
	for _, k := range order {
		content += m[k]
	}
	mac := hmac.New(sha1.New, []byte(sk))
	mac.Write(append([]byte(content), body...))
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

func TestRocketMQSignature(t *testing.T) {
	a, err := Open(writeFile(t, policyFile("p", "c")), nil)
	if err != nil {
		t.Fatal(err)
	}
	ext := map[string]string{"topic": "orders", "queueId": "3", "producerGroup": "g"}
	body := []byte("hello")
	fields := map[string]string{"AccessKey": "AK-billing", "SecurityToken": "unsigned"}
	for k, v := range ext {
		fields[k] = v
	}
	fields["Signature"] = clientSignature("AK-billing", "SK-billing", ext, body)
	p, err := a.Signature(fields, body)
	if err != nil || p.Name != "billing" {
		t.Fatalf("signed request: %v %+v", err, p)
	}
	tamper := func(f func(m map[string]string) []byte) error {
		m := map[string]string{}
		for k, v := range fields {
			m[k] = v
		}
		b := f(m)
		_, err := a.Signature(m, b)
		return err
	}
	for name, f := range map[string]func(m map[string]string) []byte{
		"body changed":  func(map[string]string) []byte { return []byte("hellO") },
		"field changed": func(m map[string]string) []byte { m["queueId"] = "4"; return body },
		"field added":   func(m map[string]string) []byte { m["x"] = "1"; return body },
		"no signature":  func(m map[string]string) []byte { delete(m, "Signature"); return body },
		"unknown key":   func(m map[string]string) []byte { m["AccessKey"] = "AK-x"; return body },
		"wrong secret": func(m map[string]string) []byte {
			m["Signature"] = clientSignature("AK-billing", "SK-x", ext, body)
			return body
		},
		"garbage base64":  func(m map[string]string) []byte { m["Signature"] = "%%%"; return body },
		"empty accesskey": func(m map[string]string) []byte { m["AccessKey"] = ""; return body },
	} {
		if err := tamper(f); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestBadFiles(t *testing.T) {
	for name, body := range map[string]string{
		"not toml":         "[[users]\n",
		"unknown key":      "colour = 1",
		"short node token": `node_token = "x"`,
		"no name":          "[[users]]\ntoken_sha256 = \"" + HashToken("a") + "\"",
		"no credential":    "[[users]]\nname = \"a\"",
		"bad hash":         "[[users]]\nname = \"a\"\ntoken_sha256 = \"abc\"",
		"twice":            "[[users]]\nname = \"a\"\ncert_cn = \"a\"\n[[users]]\nname = \"a\"\ncert_cn = \"b\"",
		"shared cert":      "[[users]]\nname = \"a\"\ncert_cn = \"a\"\n[[users]]\nname = \"b\"\ncert_cn = \"a\"",
		"key no secret":    "[[users]]\nname = \"a\"\naccess_key = \"k\"",
		"bad pattern":      "[[users]]\nname = \"a\"\ncert_cn = \"a\"\nproduce = [\"[\"]",
		"empty pattern":    "[[users]]\nname = \"a\"\ncert_cn = \"a\"\nconsume = [\"\"]",
	} {
		if _, err := Parse(body); !errors.Is(err, ErrBadFile) && err == nil {
			t.Errorf("%s: parsed", name)
		}
		if _, err := Open(writeFile(t, body), nil); !errors.Is(err, ErrBadFile) {
			t.Errorf("%s: Open: %v", name, err)
		}
	}
	if _, err := Open(filepath.Join(t.TempDir(), "none"), nil); !errors.Is(err, ErrBadFile) {
		t.Errorf("missing file: %v", err)
	}
}

func TestTokens(t *testing.T) {
	a, b := NewToken(), NewToken()
	if a == b || len(a) < 40 {
		t.Fatalf("tokens %q %q", a, b)
	}
	if HashToken(a) == HashToken(b) || len(HashToken(a)) != 64 {
		t.Fatal("hash")
	}
	p := writeFile(t, "")
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if !ReadableByOthers(p) {
		t.Error("0644 not reported")
	}
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	if ReadableByOthers(p) {
		t.Error("0600 reported")
	}
}

// FuzzParse: no input crashes the auth file parser, and what it accepts
// compiles into a policy that answers.
func FuzzParse(f *testing.F) {
	f.Add(policyFile("p", "c"))
	f.Add("")
	f.Add(`node_token = "0123456789abcdef0"`)
	f.Add("[[users]]\nname = \"a\"\ncert_cn = \"a\"\nproduce = [\"*\"]")
	f.Fuzz(func(t *testing.T, body string) {
		file, err := Parse(body)
		if err != nil {
			return
		}
		pol, err := compile(file)
		if err != nil {
			t.Fatalf("Parse accepted what compile refuses: %v", err)
		}
		for _, u := range file.Users {
			p := &Principal{Name: u.Name, user: pol.byCert[u.CertCN]}
			if p.user != nil {
				_ = p.Allowed(Produce, "t")
			}
		}
	})
}

func TestOwnProduceRates(t *testing.T) {
	a, err := Open(writeFile(t, "[[users]]\nname = \"a\"\ncert_cn = \"a\"\nproduce_messages_per_second = 50\nproduce_bytes_per_second = 1e6\n[[users]]\nname = \"b\"\ncert_cn = \"b\"\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	pa, _ := a.Cert("a")
	pb, _ := a.Cert("b")
	if m, b := pa.ProduceRates(); m != 50 || b != 1e6 {
		t.Errorf("a's rates %v %v", m, b)
	}
	if m, b := pb.ProduceRates(); m != 0 || b != 0 {
		t.Errorf("b's rates %v %v, want the defaults (0)", m, b)
	}
	if _, err := Parse("[[users]]\nname = \"a\"\ncert_cn = \"a\"\nproduce_bytes_per_second = -1\n"); err == nil {
		t.Error("a negative quota parsed")
	}
}
