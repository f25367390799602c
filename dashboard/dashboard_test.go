package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/dashboard"
	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
	"github.com/raftmq/raftmq/transport"
	"github.com/raftmq/raftmq/transport/transporttest"
)

// newDashboard serves a dashboard over the gRPC service of a real store
// (transporttest's single-node backend, no Raft).
func newDashboard(t testing.TB) (*httptest.Server, *transport.Server) {
	t.Helper()
	local, err := transporttest.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = local.Close() })
	api := transport.NewServer(local, transport.ServerOptions{})
	mux := http.NewServeMux()
	dashboard.New(dashboard.Options{API: api}).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, api
}

func do(t testing.TB, srv *httptest.Server, method, path, contentType, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return res.StatusCode, out
}

func topicNames(t testing.TB, srv *httptest.Server) []string {
	t.Helper()
	code, out := do(t, srv, http.MethodGet, "/api/topics", "", "")
	if code != http.StatusOK {
		t.Fatalf("GET /api/topics: %d %v", code, out)
	}
	var names []string
	for _, tp := range out["topics"].([]any) {
		names = append(names, tp.(map[string]any)["name"].(string))
	}
	return names
}

// TestPageIsEmbedded: GET / is the page, its assets are served from the
// binary, and they stay small.
func TestPageIsEmbedded(t *testing.T) {
	srv, _ := newDashboard(t)
	total := 0
	for _, p := range []string{"/", "/ui/app.js", "/ui/app.css"} {
		res, err := srv.Client().Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || len(body) == 0 {
			t.Fatalf("GET %s: %d, %d bytes", p, res.StatusCode, len(body))
		}
		if bytes.Contains(body, []byte("http://")) || bytes.Contains(body, []byte("https://")) {
			t.Errorf("%s refers to another origin", p)
		}
		total += len(body)
	}
	if total > 256<<10 {
		t.Errorf("the page and its assets are %d bytes", total)
	}
}

// TestBadInputIsRefused: malformed admin requests and lookups get a 4xx
// with a JSON error and change nothing.
func TestBadInputIsRefused(t *testing.T) {
	srv, _ := newDashboard(t)
	const js = "application/json"
	cases := []struct {
		name, method, path, ct, body string
		want                         int
	}{
		{"form post (no JSON content type)", "POST", "/api/topics", "application/x-www-form-urlencoded", `{"name":"a"}`, 400},
		{"no content type", "POST", "/api/topics", "", `{"name":"a"}`, 400},
		{"not JSON", "POST", "/api/topics", js, `name=a`, 400},
		{"unknown field", "POST", "/api/topics", js, `{"name":"a","evil":1}`, 400},
		{"oversized body", "POST", "/api/topics", js, `{"name":"` + strings.Repeat("a", 70<<10) + `"}`, 400},
		{"bad topic name", "POST", "/api/topics", js, `{"name":"bad name!"}`, 400},
		{"too many queues", "POST", "/api/topics", js, `{"name":"q","queues":100000}`, 400},
		{"delete missing topic", "POST", "/api/topics/delete", js, `{"name":"missing"}`, 404},
		{"reset to nowhere", "POST", "/api/groups/reset", js, `{"group":"g","topic":"t","to":"sideways"}`, 400},
		{"reset of a missing topic", "POST", "/api/groups/reset", js, `{"group":"g","topic":"missing","to":"latest"}`, 404},
		{"GET an admin path", "GET", "/api/transfer", "", "", 405},
		{"lookup without a key", "GET", "/api/messages", "", "", 400},
		{"lookup by a bad queue", "GET", "/api/messages?topic=t&queue=x&offset=0", "", "", 400},
		{"lookup by a bad offset", "GET", "/api/messages?topic=t&queue=0&offset=-x", "", "", 400},
		{"lookup by a bad phy", "GET", "/api/messages?phy=1e9", "", "", 400},
		{"metrics without a registry", "GET", "/api/metrics", "", "", 400},
	}
	for _, c := range cases {
		code, out := do(t, srv, c.method, c.path, c.ct, c.body)
		if code != c.want {
			t.Errorf("%s: status %d (%v), want %d", c.name, code, out, c.want)
		}
		if c.want != 405 && (out == nil || out["error"] == "") {
			t.Errorf("%s: no JSON error: %v", c.name, out)
		}
	}
	if names := topicNames(t, srv); len(names) != 0 {
		t.Fatalf("bad input created topics %v", names)
	}
}

// TestAdminActions: create, reset a group and delete through the
// dashboard land in the store as the gRPC service reports them.
func TestAdminActions(t *testing.T) {
	srv, api := newDashboard(t)
	ctx := context.Background()
	const js = "application/json"
	if code, out := do(t, srv, "POST", "/api/topics", js, `{"name":"orders","queues":2}`); code != 200 {
		t.Fatalf("create: %d %v", code, out)
	}
	if code, out := do(t, srv, "POST", "/api/topics", js, `{"name":"orders","queues":2}`); code != 409 {
		t.Fatalf("create twice: %d %v", code, out)
	}
	var msgs []*pb.Message
	for i := range 10 {
		msgs = append(msgs, &pb.Message{Topic: "orders", QueueId: int32(i % 2), Body: []byte("m")})
	}
	if _, err := api.Send(ctx, &pb.SendRequest{Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	for _, to := range []struct {
		name string
		want int64
	}{{"latest", 5}, {"earliest", 0}} {
		if code, out := do(t, srv, "POST", "/api/groups/reset", js, `{"group":"g","topic":"orders","to":"`+to.name+`"}`); code != 200 {
			t.Fatalf("reset to %s: %d %v", to.name, code, out)
		}
		for q := range int32(2) {
			off, err := api.QueryOffset(ctx, &pb.QueryOffsetRequest{Group: "g", Topic: "orders", QueueId: q})
			if err != nil || !off.GetFound() || off.GetOffset() != to.want {
				t.Fatalf("after reset to %s, queue %d: %v %v, want %d", to.name, q, off, err, to.want)
			}
		}
	}
	code, out := do(t, srv, "GET", "/api/messages?topic=orders&queue=1&offset=4", "", "")
	if code != 200 {
		t.Fatalf("lookup: %d %v", code, out)
	}
	if m := out["messages"].([]any)[0].(map[string]any); m["queueOffset"] != "4" || m["queueId"] != float64(1) {
		t.Fatalf("lookup answered %v", m)
	}
	if code, out := do(t, srv, "GET", "/api/messages?topic=orders&queue=1&offset=5", "", ""); code != 400 {
		t.Fatalf("lookup past the end: %d %v", code, out)
	}
	if code, out := do(t, srv, "POST", "/api/topics/delete", js, `{"name":"orders"}`); code != 200 {
		t.Fatalf("delete: %d %v", code, out)
	}
	if names := topicNames(t, srv); len(names) != 0 {
		t.Fatalf("after delete: topics %v", names)
	}
}

// FuzzAdmin: any body to any admin path gets an answer below 500 and
// never panics the handler.
func FuzzAdmin(f *testing.F) {
	f.Add(0, []byte(`{"name":"a","queues":1}`))
	f.Add(1, []byte(`{"name":"a"}`))
	f.Add(2, []byte(`{"group":"g","topic":"a","to":"offset","queueId":0,"offset":-1}`))
	f.Add(3, []byte(`{"id":""}`))
	paths := []string{"/api/topics", "/api/topics/delete", "/api/groups/reset", "/api/transfer"}
	srv, _ := newDashboard(f)
	f.Fuzz(func(t *testing.T, which int, body []byte) {
		path := paths[uint(which)%uint(len(paths))]
		code, _ := do(t, srv, "POST", path, "application/json", string(body))
		// The single-node backend has no membership: a transfer is
		// unavailable there (503); everything else is the input's fault.
		if code >= 500 && !(path == "/api/transfer" && code == 503) {
			t.Fatalf("POST %s %q: status %d", path, body, code)
		}
	})
}
