package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/nodeproc"
	"github.com/raftmq/raftmq/internal/testenv"
)

// screenshotDirEnv, when set, is where TestDashboard saves its
// screenshots (docs/dashboard for the README's); otherwise a temp dir.
const screenshotDirEnv = "RAFTMQ_DASHBOARD_SCREENSHOTS"

// chromium finds a headless Chromium (Debian's chromium-headless-shell
// or chromium); "" and why when there is none.
func chromium() (path, why string) {
	for _, name := range []string{"chromium-headless-shell", "chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, ""
		}
	}
	return "", "no headless Chromium in PATH (apt-get install chromium-headless-shell)"
}

// browser is one headless Chromium tab, closed by the test's cleanup.
type browser struct {
	t    *testing.T
	ctx  context.Context
	shot string // screenshot dir
}

func newBrowser(t *testing.T, exe string) *browser {
	t.Helper()
	// The browser runs in its own process group, which the cleanup kills
	// whole (zygotes and renderers included): a test binary that exits
	// right after the test must not leave Chromium behind.
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 1000), chromedp.ModifyCmdFunc(func(cmd *exec.Cmd) {
			if cmd.SysProcAttr == nil {
				cmd.SysProcAttr = &syscall.SysProcAttr{}
			}
			cmd.SysProcAttr.Setpgid = true
			cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
		}))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	tab, cancelTab := chromedp.NewContext(allocCtx)
	if err := chromedp.Run(tab); err != nil { // starts the browser
		cancelTab()
		cancelAlloc()
		t.Fatalf("start %s: %v", exe, err)
	}
	proc := chromedp.FromContext(tab).Browser.Process()
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
		if proc == nil {
			return
		}
		_ = syscall.Kill(-proc.Pid, syscall.SIGKILL)
		deadline := time.Now().Add(10 * time.Second)
		for syscall.Kill(-proc.Pid, 0) == nil { // until no process of the group is left
			if time.Now().After(deadline) {
				t.Errorf("chromium process group %d still alive 10 s after SIGKILL", proc.Pid)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	dir := os.Getenv(screenshotDirEnv)
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, ctx: tab, shot: dir}
}

func (b *browser) run(actions ...chromedp.Action) {
	b.t.Helper()
	if err := chromedp.Run(b.ctx, actions...); err != nil {
		b.t.Fatalf("browser: %v", err)
	}
}

// open loads url and waits until the page has refreshed from the node
// once (body[data-refreshed]).
func (b *browser) open(url string) {
	b.t.Helper()
	b.run(chromedp.Navigate(url), chromedp.WaitVisible(`body[data-refreshed]`, chromedp.ByQuery))
}

// eval evaluates a JS expression into out.
func (b *browser) eval(expr string, out any) error {
	return chromedp.Run(b.ctx, chromedp.Evaluate(expr, out))
}

// until evaluates expr into a fresh V until check accepts it; the error
// names check's last complaint.
func until[V any](ctx context.Context, b *browser, expr string, check func(V) error) (V, error) {
	var last V
	err := pollUntil(ctx, func() error {
		var v V
		if err := b.eval(expr, &v); err != nil {
			return err
		}
		last = v
		return check(v)
	})
	return last, err
}

// screenshot saves the viewport as name.png and checks it is a PNG with
// content.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	var png []byte
	b.run(chromedp.FullScreenshot(&png, 100))
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 10<<10 {
		b.t.Fatalf("screenshot %s: %d bytes, not a PNG with content", name, len(png))
	}
	if err := os.WriteFile(filepath.Join(b.shot, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

func digits(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), ",", "") }

// clusterView is what the cluster page shows.
type clusterView struct {
	ID, State, Leader, Term, Confirm string
	Members                          []string
	Changes                          []string
	Banner                           string
	BannerShown                      bool
}

const clusterExpr = `(() => ({
  ID: document.getElementById("c-id").textContent,
  State: document.getElementById("c-state").textContent,
  Leader: document.getElementById("c-leader").textContent,
  Term: document.getElementById("c-term").textContent,
  Confirm: document.getElementById("c-confirm").textContent,
  Members: [...document.querySelectorAll("#c-members tr")].map(tr => tr.dataset.member + " " + tr.children[1].textContent),
  Changes: [...document.querySelectorAll("#c-changes li")].map(li => li.textContent),
  Banner: document.getElementById("banner").textContent,
  BannerShown: !document.getElementById("banner").hidden,
}))()`

// checkCluster compares the cluster page with the node's Status.
func checkCluster(v clusterView, st client.ClusterStatus) error {
	var members []string
	for _, m := range st.Members {
		role := "follower"
		if m.ID == st.LeaderID {
			role = "leader"
		}
		members = append(members, m.ID+" "+role)
	}
	leader := st.LeaderID
	if leader == "" {
		leader = "none"
	}
	switch {
	case v.ID != st.ID || v.State != st.State || v.Leader != leader:
		return fmt.Errorf("page shows node %s %s leader %s; the API says %s %s leader %s", v.ID, v.State, v.Leader, st.ID, st.State, leader)
	case v.Term != strconv.FormatUint(st.Term, 10) || v.Confirm != strconv.FormatInt(st.ConfirmOffset, 10):
		return fmt.Errorf("page shows term %s confirm %s; the API says %d, %d", v.Term, v.Confirm, st.Term, st.ConfirmOffset)
	case !slices.Equal(v.Members, members):
		return fmt.Errorf("page shows members %q; the API says %q", v.Members, members)
	case v.BannerShown != (st.State != "Leader"):
		return fmt.Errorf("follower banner shown %v (%q) on a %s", v.BannerShown, v.Banner, st.State)
	}
	return nil
}

// topicRow is one row of the topics page.
type topicRow struct{ Topic, Queues, Messages, Offsets string }

const topicsExpr = `[...document.querySelectorAll("#t-rows tr")].map(tr => ({
  Topic: tr.dataset.topic, Queues: tr.querySelector(".queues").textContent,
  Messages: tr.querySelector(".messages").textContent, Offsets: tr.querySelector(".offsets").textContent}))`

// checkTopic compares a topic's row with DescribeTopic.
func checkTopic(rows []topicRow, info client.TopicInfo) error {
	var msgs int64
	var offs []string
	for _, q := range info.Offsets {
		msgs += q.Max - q.Min
		offs = append(offs, fmt.Sprintf("%d:%d/%d", q.QueueID, q.Min, q.Max))
	}
	want := topicRow{Topic: info.Name, Queues: strconv.Itoa(int(info.Queues)), Messages: strconv.FormatInt(msgs, 10), Offsets: strings.Join(offs, " ")}
	for _, r := range rows {
		if r.Topic == info.Name {
			r.Messages = digits(r.Messages)
			if r != want {
				return fmt.Errorf("topic row %+v; the API says %+v", r, want)
			}
			return nil
		}
	}
	return fmt.Errorf("no row for topic %s in %+v", info.Name, rows)
}

// groupView is one group's box on the groups page.
type groupView struct {
	Lag, Members string
	Queues       []string // "topic/queue committed lag"
}

func groupExpr(group string) string {
	return fmt.Sprintf(`(() => { const g = document.querySelector('.group[data-group=%q]'); if (!g) return null; return {
  Lag: g.querySelector(".group-lag").textContent, Members: g.querySelector(".members").textContent,
  Queues: [...g.querySelectorAll("tbody tr")].map(tr => tr.dataset.queue + " " + tr.querySelector(".committed").textContent + " " + tr.querySelector(".lag").textContent)}; })()`, group)
}

// checkGroup compares a group's box with DescribeGroup, ListGroups and
// GroupMembers.
func checkGroup(ctx context.Context, cl *client.Client, group string, v *groupView) error {
	if v == nil {
		return fmt.Errorf("no box for group %s", group)
	}
	queues, err := cl.DescribeGroup(ctx, group, "")
	if err != nil {
		return err
	}
	var want []string
	var lag int64
	for _, q := range queues {
		committed := "none"
		if q.Committed != client.NoCommit {
			committed = strconv.FormatInt(q.Committed, 10)
			lag += q.Lag
		}
		want = append(want, fmt.Sprintf("%s/%d %s %d", q.Topic, q.QueueID, committed, q.Lag))
	}
	if !slices.Equal(v.Queues, want) {
		return fmt.Errorf("group %s shows %q; the API says %q", group, v.Queues, want)
	}
	summaries, err := cl.ListGroups(ctx)
	if err != nil {
		return err
	}
	for _, s := range summaries {
		if s.Group == group && digits(strings.TrimPrefix(v.Lag, "lag ")) != strconv.FormatInt(s.Lag, 10) {
			return fmt.Errorf("group %s shows %q; the API says lag %d", group, v.Lag, s.Lag)
		}
	}
	members, _, err := cl.GroupMembers(ctx, group)
	if err != nil {
		return err
	}
	if len(members) > 0 && v.Members != "members: "+strings.Join(members, ", ") {
		return fmt.Errorf("group %s shows %q; the API says members %q", group, v.Members, members)
	}
	return nil
}

// scrapeCounter reads one series from a node's /metrics: a counter's name,
// with its labels as exposed when it has any (name{label="value"}).
func scrapeCounter(ctx context.Context, p *nodeproc.Proc, name string) (float64, error) {
	body, err := p.Get(ctx, "/metrics")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("%s not in %s's /metrics", name, p.Spec().ID)
}

// TestDashboard drives the web dashboard in headless Chromium against a
// real 3-node cluster: each page shows what the API answers (cluster,
// topics, groups with lag and live members, a message looked up by msgId
// and by key, live throughput and latency), admin actions run only after
// their confirmation, and the cluster page follows a kill -9 of the
// leader. Screenshots go to $RAFTMQ_DASHBOARD_SCREENSHOTS (docs/dashboard
// for the README) or a temp dir.
func TestDashboard(t *testing.T) {
	exe, why := chromium()
	testenv.Require(t, why)
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cl := newClient(t, ctx, c, client.Options{})
	const orders, payments, reader, live = "dash-orders", "dash-payments", "dash-reader", "dash-live"
	cli(t, ctx, c, "topic", "create", orders, "--queues", "4")
	cli(t, ctx, c, "topic", "create", payments, "--queues", "2")
	cli(t, ctx, c, "produce", "-t", orders, "-n", "400", "-s", "64")
	cli(t, ctx, c, "produce", "-t", payments, "-n", "150", "-s", "64")
	cli(t, ctx, c, "consume", "-t", orders, "--group", reader, "-n", "100", "--quiet")
	member := startMember(t, ctx, c, "live member", "consume", "-t", payments, "--group", live, "--json", "--wait", "500ms")
	if err := waitFor(ctx, "the live member to read every payment", func() bool { return len(member.consumed(t)) >= 150 }); err != nil {
		t.Fatalf("%v; stderr:\n%s", err, member.stderr.String())
	}
	res, err := cl.Send(ctx, client.Message{Topic: orders, QueueID: -1, Body: []byte("hello from the dashboard test"),
		Tag: "dash-tag", Keys: []string{"dash-key-1"}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("send: %v %v", err, res)
	}
	lookedUp := res[0]

	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	view := (leader + 1) % len(c.Nodes) // a follower's dashboard
	viewSpec := c.Nodes[view].Spec()
	base := "http://" + viewSpec.HTTPAddr
	b := newBrowser(t, exe)

	// Cluster page, on a follower.
	b.open(base + "/#cluster")
	if _, err := until(ctx, b, clusterExpr, func(v clusterView) error {
		st, err := cl.StatusOf(ctx, viewSpec.APIAddr)
		if err != nil {
			return err
		}
		return checkCluster(v, st)
	}); err != nil {
		t.Fatalf("cluster page: %v", err)
	}
	b.screenshot("cluster")

	// Topics page: both topics as DescribeTopic has them.
	b.open(base + "/#topics")
	if _, err := until(ctx, b, topicsExpr, func(rows []topicRow) error {
		for _, name := range []string{orders, payments} {
			info, err := cl.DescribeTopic(ctx, name)
			if err != nil {
				return err
			}
			if err := checkTopic(rows, info); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("topics page: %v", err)
	}
	b.screenshot("topics")

	// Groups page: offsets, lag and live members as the API has them.
	b.open(base + "/#groups")
	for _, g := range []string{reader, live} {
		if _, err := until(ctx, b, groupExpr(g), func(v *groupView) error { return checkGroup(ctx, cl, g, v) }); err != nil {
			t.Fatalf("groups page: %v", err)
		}
	}
	b.screenshot("groups")

	// Lookup by msgId, then by key: the stored message's fields and body.
	b.open(base + "/#lookup")
	stored, err := cl.QueryByMsgID(ctx, orders, lookedUp.MsgID)
	if err != nil || len(stored) != 1 {
		t.Fatalf("QueryByMsgID: %v (%d messages)", err, len(stored))
	}
	m := stored[0]
	want := fmt.Sprintf("%s %d %d %d %s %s %s", m.MsgID, m.QueueID, m.QueueOffset, m.PhysicalOffset, m.Properties["KEYS"], m.Properties["TAGS"], m.Body)
	msgExpr := `(() => { const m = document.querySelector(".message"); if (!m) return ""; const f = (k) => m.querySelector('[data-field="' + k + '"]').textContent;
  const p = (k) => (m.querySelector('[data-prop="' + k + '"]') || {}).textContent;
  return [m.dataset.msgid, f("queue"), f("queue offset"), f("commitlog offset"), p("KEYS"), p("TAGS"), m.querySelector(".body").textContent].join(" "); })()`
	for _, by := range [][2]string{{"msgId", m.MsgID}, {"key", "dash-key-1"}} {
		b.run(chromedp.Evaluate(`document.getElementById("l-result").replaceChildren()`, nil),
			chromedp.SetValue("#l-by", by[0], chromedp.ByQuery),
			chromedp.SetValue("#l-value", by[1], chromedp.ByQuery),
			chromedp.SetValue("#l-topic", orders, chromedp.ByQuery),
			chromedp.Click("#l-go", chromedp.ByQuery))
		if got, err := until(ctx, b, msgExpr, func(s string) error {
			if s != want {
				return fmt.Errorf("lookup by %s shows %q; the API says %q", by[0], s, want)
			}
			return nil
		}); err != nil {
			t.Fatalf("%v (last %q)", err, got)
		}
	}
	b.screenshot("lookup")

	// Live page on the leader, under load: rates and commit latency
	// appear; once the load ends, the stored count is the node's metric.
	leaderSpec := c.Nodes[leader].Spec()
	b.open("http://" + leaderSpec.HTTPAddr + "/#live")
	stopLoad, sent := make(chan struct{}), newSendLog()
	load := produceUntil(ctx, cl, orders, 4, stopLoad, sent)
	type liveView struct{ Rate, P50, P99, Total, Samples string }
	const liveExpr = `({Rate: document.getElementById("m-rate").textContent, P50: document.getElementById("m-p50").textContent,
  P99: document.getElementById("m-p99").textContent, Total: document.getElementById("m-total").textContent,
  Samples: document.getElementById("m-chart").dataset.samples || "0"})`
	if got, err := until(ctx, b, liveExpr, func(v liveView) error {
		if r, _ := strconv.Atoi(digits(v.Rate)); r <= 0 || !strings.HasSuffix(v.P50, " ms") || !strings.HasSuffix(v.P99, " ms") {
			return fmt.Errorf("no rate or latency under load yet")
		}
		if n, _ := strconv.Atoi(v.Samples); n < 5 { // a few points on the charts for the screenshot
			return fmt.Errorf("%d chart points", n)
		}
		return nil
	}); err != nil {
		t.Fatalf("live page: %v (last %+v)", err, got)
	}
	b.screenshot("throughput")
	close(stopLoad)
	load.Wait()
	if len(sent.acked) == 0 {
		t.Fatalf("the load stored nothing (failed %d)", len(sent.failed))
	}
	if got, err := until(ctx, b, liveExpr, func(v liveView) error {
		n, err := scrapeCounter(ctx, c.Nodes[leader], "raftmq_store_messages_total")
		if err != nil {
			return err
		}
		if digits(v.Total) != strconv.FormatFloat(n, 'f', -1, 64) {
			return fmt.Errorf("page shows %s stored; /metrics says %v", v.Total, n)
		}
		return nil
	}); err != nil {
		t.Fatalf("live page: %v (last %+v)", err, got)
	}

	// Admin: a cancelled create changes nothing; a confirmed one creates.
	b.open(base + "/#topics")
	const created = "dash-created"
	b.run(chromedp.SetValue("#new-topic", created, chromedp.ByQuery), chromedp.SetValue("#new-queues", "3", chromedp.ByQuery),
		chromedp.Click("#create-btn", chromedp.ByQuery), chromedp.WaitVisible("#confirm", chromedp.ByQuery),
		chromedp.Click("#confirm-no", chromedp.ByQuery), chromedp.WaitNotVisible("#confirm", chromedp.ByQuery))
	if _, err := cl.DescribeTopic(ctx, created); err == nil {
		t.Fatal("a cancelled create created the topic")
	}
	b.run(chromedp.Click("#create-btn", chromedp.ByQuery), chromedp.WaitVisible("#confirm", chromedp.ByQuery),
		chromedp.Click("#confirm-yes", chromedp.ByQuery))
	if err := pollUntil(ctx, func() error {
		info, err := cl.DescribeTopic(ctx, created)
		if err == nil && info.Queues != 3 {
			return fmt.Errorf("created with %d queues", info.Queues)
		}
		return err
	}); err != nil {
		t.Fatalf("create from the dashboard (a follower's): %v", err)
	}

	// Follow a kill -9 of the leader on the follower's cluster page.
	b.open(base + "/#cluster")
	if _, err := until(ctx, b, clusterExpr, func(v clusterView) error {
		if v.Leader != c.Nodes[leader].Spec().ID {
			return fmt.Errorf("page shows leader %s, want %s", v.Leader, c.Nodes[leader].Spec().ID)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	old := c.Nodes[leader]
	if err := old.Kill(); err != nil {
		t.Fatal(err)
	}
	if old.Running() {
		t.Fatalf("leader %s still running after kill -9", old.Spec().ID)
	}
	v, err := until(ctx, b, clusterExpr, func(v clusterView) error {
		if v.Leader == old.Spec().ID || v.Leader == "none" || len(v.Changes) == 0 ||
			!strings.Contains(v.Changes[0], old.Spec().ID+" → "+v.Leader) {
			return fmt.Errorf("page shows leader %s, changes %q", v.Leader, v.Changes)
		}
		st, err := cl.StatusOf(ctx, viewSpec.APIAddr)
		if err != nil {
			return err
		}
		return checkCluster(v, st)
	})
	if err != nil {
		t.Fatalf("after killing leader %s: %v", old.Spec().ID, err)
	}
	b.screenshot("leader-change")
	t.Logf("the cluster page of %s followed the kill of leader %s: %s", viewSpec.ID, old.Spec().ID, v.Changes[0])
}
