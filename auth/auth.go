package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/BurntSushi/toml"
)

// The errors of authentication and authorization.
var (
	ErrUnauthenticated = errors.New("auth: not authenticated")
	ErrExpired         = errors.New("auth: credential expired")
	ErrRevoked         = errors.New("auth: credential revoked")
	ErrDenied          = errors.New("auth: permission denied")
	ErrBadFile         = errors.New("auth: bad auth file")
)

// Role is what a grant allows.
type Role string

// The roles.
const (
	Admin   Role = "admin"   // everything
	Produce Role = "produce" // send to matching topics
	Consume Role = "consume" // read matching topics (with Group: commit matching groups' offsets)
	Group   Role = "group"   // use matching consumer groups
	// Read is any authenticated principal: status, topic and group lists.
	Read Role = "read"
)

// User is one [[users]] entry of the auth file.
type User struct {
	Name        string    `toml:"name"`
	TokenSHA256 string    `toml:"token_sha256"`
	CertCN      string    `toml:"cert_cn"`
	AccessKey   string    `toml:"access_key"`
	SecretKey   string    `toml:"secret_key"`
	Expires     time.Time `toml:"expires"`
	Revoked     bool      `toml:"revoked"`
	Admin       bool      `toml:"admin"`
	Produce     []string  `toml:"produce"`
	Consume     []string  `toml:"consume"`
	Groups      []string  `toml:"groups"`
	// ProduceMessagesPerSecond and ProduceBytesPerSecond are this user's
	// own produce quota, in place of the node's [limits] (0: those).
	ProduceMessagesPerSecond float64 `toml:"produce_messages_per_second"`
	ProduceBytesPerSecond    float64 `toml:"produce_bytes_per_second"`
}

// File is the auth file.
type File struct {
	NodeToken string `toml:"node_token"`
	Users     []User `toml:"users"`
}

// Principal is an authenticated caller.
type Principal struct {
	Name string
	Node bool // another node of the cluster (node_token): every role
	user *User
}

// Allowed reports whether p holds role on resource (a topic for Produce and
// Consume, a group for Group; ignored for Admin and Read).
func (p *Principal) Allowed(role Role, resource string) bool {
	if p == nil {
		return false
	}
	if p.Node || p.user.Admin {
		return true
	}
	switch role {
	case Read:
		return true
	case Produce:
		return matchAny(p.user.Produce, resource)
	case Consume:
		return matchAny(p.user.Consume, resource)
	case Group:
		return matchAny(p.user.Groups, resource)
	}
	return false
}

// ProduceRates are the principal's own produce quota (messages and body
// bytes per second; 0: the node's default). Other nodes have none.
func (p *Principal) ProduceRates() (messages, bytes float64) {
	if p == nil || p.user == nil {
		return 0, 0
	}
	return p.user.ProduceMessagesPerSecond, p.user.ProduceBytesPerSecond
}

// Check is Allowed as an error: ErrDenied wrapped with what was refused.
func (p *Principal) Check(role Role, resource string) error {
	if p.Allowed(role, resource) {
		return nil
	}
	name := "anonymous"
	if p != nil {
		name = p.Name
	}
	if resource == "" || role == Admin || role == Read {
		return fmt.Errorf("%w: %s does not hold the %s role", ErrDenied, name, role)
	}
	return fmt.Errorf("%w: %s may not %s %q", ErrDenied, name, role, resource)
}

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// policy is one load of the file, indexed.
type policy struct {
	nodeToken string
	byToken   map[string]*User // by hex SHA-256
	byCert    map[string]*User
	byKey     map[string]*User
}

// Authenticator holds the newest policy read from its file.
type Authenticator struct {
	path string
	now  func() time.Time
	cur  atomic.Pointer[policy]
}

// Open reads the auth file at path. now is the clock for expiry (nil:
// time.Now).
func Open(path string, now func() time.Time) (*Authenticator, error) {
	if now == nil {
		now = time.Now
	}
	a := &Authenticator{path: path, now: now}
	if err := a.Reload(); err != nil {
		return nil, err
	}
	return a, nil
}

// Reload reads the file again; on error the policy in force is kept.
func (a *Authenticator) Reload() error {
	var f File
	md, err := toml.DecodeFile(a.path, &f)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrBadFile, a.path, err)
	}
	if un := md.Undecoded(); len(un) > 0 {
		keys := make([]string, len(un))
		for i, k := range un {
			keys[i] = k.String()
		}
		return fmt.Errorf("%w: %s: unknown keys %s", ErrBadFile, a.path, strings.Join(keys, ", "))
	}
	p, err := compile(f)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrBadFile, a.path, err)
	}
	a.cur.Store(p)
	return nil
}

// Parse checks an auth file's contents without installing them (for
// `raftmq auth check` and the tests).
func Parse(data string) (File, error) {
	var f File
	md, err := toml.Decode(data, &f)
	if err != nil {
		return f, fmt.Errorf("%w: %v", ErrBadFile, err)
	}
	if un := md.Undecoded(); len(un) > 0 {
		return f, fmt.Errorf("%w: unknown key %s", ErrBadFile, un[0])
	}
	_, err = compile(f)
	return f, err
}

func compile(f File) (*policy, error) {
	p := &policy{nodeToken: f.NodeToken, byToken: map[string]*User{}, byCert: map[string]*User{}, byKey: map[string]*User{}}
	if f.NodeToken != "" && len(f.NodeToken) < 16 {
		return nil, errors.New("node_token is shorter than 16 characters")
	}
	names := map[string]bool{}
	for i := range f.Users {
		u := &f.Users[i]
		if u.Name == "" {
			return nil, fmt.Errorf("user %d has no name", i+1)
		}
		if names[u.Name] {
			return nil, fmt.Errorf("user %q appears twice", u.Name)
		}
		names[u.Name] = true
		if u.TokenSHA256 == "" && u.CertCN == "" && u.AccessKey == "" {
			return nil, fmt.Errorf("user %q has no credential (token_sha256, cert_cn or access_key)", u.Name)
		}
		if err := u.index(p); err != nil {
			return nil, err
		}
		if u.ProduceMessagesPerSecond < 0 || u.ProduceBytesPerSecond < 0 {
			return nil, fmt.Errorf("user %q: a negative produce quota", u.Name)
		}
		for _, list := range [][]string{u.Produce, u.Consume, u.Groups} {
			for _, pat := range list {
				if _, err := path.Match(pat, ""); err != nil || pat == "" {
					return nil, fmt.Errorf("user %q: bad pattern %q", u.Name, pat)
				}
			}
		}
	}
	return p, nil
}

func (u *User) index(p *policy) error {
	if u.TokenSHA256 != "" {
		h := strings.ToLower(u.TokenSHA256)
		if b, err := hex.DecodeString(h); err != nil || len(b) != sha256.Size {
			return fmt.Errorf("user %q: token_sha256 is not 64 hex digits", u.Name)
		}
		if p.byToken[h] != nil {
			return fmt.Errorf("user %q: token_sha256 shared with %q", u.Name, p.byToken[h].Name)
		}
		p.byToken[h] = u
	}
	if u.CertCN != "" {
		if p.byCert[u.CertCN] != nil {
			return fmt.Errorf("user %q: cert_cn %q shared with %q", u.Name, u.CertCN, p.byCert[u.CertCN].Name)
		}
		p.byCert[u.CertCN] = u
	}
	if u.AccessKey != "" {
		if u.SecretKey == "" {
			return fmt.Errorf("user %q: access_key without secret_key", u.Name)
		}
		if p.byKey[u.AccessKey] != nil {
			return fmt.Errorf("user %q: access_key shared with %q", u.Name, p.byKey[u.AccessKey].Name)
		}
		p.byKey[u.AccessKey] = u
	}
	return nil
}

// NodeToken is the secret this node presents to the others ("" if none).
func (a *Authenticator) NodeToken() string { return a.cur.Load().nodeToken }

// Token authenticates a bearer token.
func (a *Authenticator) Token(token string) (*Principal, error) {
	if token == "" {
		return nil, fmt.Errorf("%w: no token (set --token or RAFTMQ_TOKEN)", ErrUnauthenticated)
	}
	p := a.cur.Load()
	if p.nodeToken != "" && subtle.ConstantTimeCompare([]byte(token), []byte(p.nodeToken)) == 1 {
		return &Principal{Name: "node", Node: true}, nil
	}
	return a.admit(p.byToken[HashToken(token)], "token")
}

// Cert authenticates a verified client certificate's Common Name.
func (a *Authenticator) Cert(cn string) (*Principal, error) {
	if cn == "" {
		return nil, fmt.Errorf("%w: no client certificate", ErrUnauthenticated)
	}
	return a.admit(a.cur.Load().byCert[cn], "certificate "+cn)
}

// Signature authenticates a RocketMQ ACL request: fields are the request's
// extension fields (AccessKey and Signature among them), body its body.
// The signature is Base64(HMAC-SHA1(secret, values of the other fields in
// the order of their sorted keys, then the body)); SecurityToken is not
// signed.
func (a *Authenticator) Signature(fields map[string]string, body []byte) (*Principal, error) {
	ak, sig := fields["AccessKey"], fields["Signature"]
	if ak == "" || sig == "" {
		return nil, fmt.Errorf("%w: no AccessKey and Signature", ErrUnauthenticated)
	}
	u := a.cur.Load().byKey[ak]
	if u == nil {
		return nil, fmt.Errorf("%w: unknown AccessKey", ErrUnauthenticated)
	}
	want := Sign(fields, body, u.SecretKey)
	if !hmac.Equal([]byte(want), []byte(sig)) {
		return nil, fmt.Errorf("%w: signature does not match (AccessKey %s)", ErrUnauthenticated, ak)
	}
	return a.admit(u, "AccessKey "+ak)
}

// Sign computes RocketMQ's ACL signature of fields (Signature and
// SecurityToken excluded) and body with secret.
func Sign(fields map[string]string, body []byte, secret string) string {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		if k != "Signature" && k != "SecurityToken" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	mac := hmac.New(sha1.New, []byte(secret))
	for _, k := range keys {
		mac.Write([]byte(fields[k]))
	}
	mac.Write(body)
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

func (a *Authenticator) admit(u *User, what string) (*Principal, error) {
	if u == nil {
		return nil, fmt.Errorf("%w: unknown %s", ErrUnauthenticated, strings.Fields(what)[0])
	}
	if u.Revoked {
		return nil, fmt.Errorf("%w: %s (user %s)", ErrRevoked, what, u.Name)
	}
	if !u.Expires.IsZero() && !a.now().Before(u.Expires) {
		return nil, fmt.Errorf("%w: %s (user %s) expired at %s", ErrExpired, what, u.Name, u.Expires.UTC().Format(time.RFC3339))
	}
	return &Principal{Name: u.Name, user: u}, nil
}

// HashToken is the hex SHA-256 the auth file keeps of a token.
func HashToken(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// NewToken is a fresh random token (256 bits, URL-safe base64).
func NewToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// ReadableByOthers reports whether the file at path can be read by users
// other than its owner (a node warns: it holds the node token and secret
// keys).
func ReadableByOthers(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().Perm()&0o044 != 0
}
