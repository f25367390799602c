// raftmq dashboard: polls the node's /api/ once a second and renders the
// page shown by the location hash. No libraries, no network beyond this node.
"use strict";

const $ = (id) => document.getElementById(id);
const num = (v) => (v === undefined || v === null || v === "" ? 0 : Number(v));
const fmt = (v) => num(v).toLocaleString("en-US");
const REFRESH_MS = 1000;
const HISTORY = 120; // samples kept for charts

const state = {
  page: "cluster",
  status: null,
  leaderSeen: null,
  changes: [],
  topics: null,
  prevTopics: null,
  groups: null,
  prevGroups: null,
  lagHistory: {}, // group -> [lag]
  metrics: [], // samples
};

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return e;
}

async function getJSON(path) {
  const r = await fetch(path, { cache: "no-store" });
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

async function postJSON(path, obj) {
  const r = await fetch(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(obj) });
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

function showError(msg) {
  const e = $("error");
  e.hidden = !msg;
  e.textContent = msg || "";
}

// confirmThen shows the confirmation box; fn runs only after Confirm.
function confirmThen(text, fn) {
  $("confirm-text").textContent = text;
  $("confirm").hidden = false;
  const done = () => { $("confirm").hidden = true; $("confirm-yes").onclick = null; $("confirm-no").onclick = null; };
  $("confirm-no").onclick = done;
  $("confirm-yes").onclick = async () => {
    done();
    try { await fn(); showError(""); } catch (err) { showError(err.message); }
    refresh();
  };
}

// ---- cluster ----

function renderStatus(s) {
  $("node-line").textContent = `node ${s.id} · ${s.state}`;
  $("c-id").textContent = s.id;
  $("c-state").textContent = s.state;
  $("c-leader").textContent = s.leaderId || "none";
  $("c-term").textContent = s.term;
  $("c-commit").textContent = s.commitIndex;
  $("c-applied").textContent = s.appliedIndex;
  $("c-confirm").textContent = s.confirmOffset;
  $("c-minmax").textContent = `${s.minOffset} / ${s.maxOffset}`;
  $("c-disk").textContent = num(s.diskUsedPercent) ? `${s.diskUsedPercent} %` : "unknown";
  const behind = num(s.commitIndex) - num(s.appliedIndex);
  $("c-health").textContent = !s.leaderId ? "no leader" : behind > 0 ? `applying (${behind} entries behind commit)` : "serving";
  const tb = $("c-members");
  tb.replaceChildren(...s.members.map((m) =>
    el("tr", { "data-member": m.id }, el("td", {}, m.id), el("td", {}, m.id === s.leaderId ? "leader" : "follower"),
      el("td", {}, m.suffrage), el("td", {}, m.raftAddr), el("td", {}, m.apiAddr))));
  const sel = $("transfer-to");
  const want = ["", ...s.members.filter((m) => m.id !== s.leaderId && m.suffrage.toLowerCase() === "voter").map((m) => m.id)];
  if ([...sel.options].map((o) => o.value).join() !== want.join()) {
    sel.replaceChildren(...want.map((id) => el("option", { value: id }, id || "any voter")));
  }
  // Leader changes, as this page saw them.
  const seen = `${s.leaderId}@${s.term}`;
  if (state.leaderSeen !== null && s.leaderId && state.leaderSeen.id !== s.leaderId) {
    state.changes.unshift({ at: new Date(), from: state.leaderSeen.id, to: s.leaderId, term: s.term });
  }
  if (s.leaderId) state.leaderSeen = { id: s.leaderId, key: seen };
  $("c-changes").replaceChildren(...state.changes.map((c) =>
    el("li", { class: "change" }, `${c.at.toLocaleTimeString()}: ${c.from || "none"} → ${c.to} (term ${c.term})`)));
  // A follower says how far it is behind.
  const banner = $("banner");
  if (s.state !== "Leader") {
    banner.hidden = false;
    banner.textContent = behind > 0
      ? `This node is a ${s.state.toLowerCase()}: its replica is ${behind} Raft entries behind the commit index it knows; topics and lookups show its replica, groups the leader's view.`
      : `This node is a ${s.state.toLowerCase()} and has applied everything it knows committed (leader: ${s.leaderId || "none"}).`;
  } else {
    banner.hidden = true;
  }
}

// ---- topics ----

function topicTotals(t) {
  let msgs = 0, max = 0;
  for (const q of t.queueOffsets) { msgs += num(q.maxOffset) - num(q.minOffset); max += num(q.maxOffset); }
  return { msgs, max };
}

function committedByTopic(groups) {
  const by = {};
  for (const g of groups || []) {
    for (const q of g.queues.queues) if (q.committed) by[q.topic] = (by[q.topic] || 0) + num(q.committedOffset);
  }
  return by;
}

function rate(cur, prev, dtMs) {
  if (prev === undefined || dtMs <= 0) return "–";
  return Math.max(0, ((cur - prev) * 1000) / dtMs).toFixed(0);
}

function renderTopics() {
  const cur = state.topics, prev = state.prevTopics;
  if (!cur) return;
  const dt = prev ? cur.at - prev.at : 0;
  const prevMax = {}, prevCommitted = prev ? prev.committed : {};
  if (prev) for (const t of prev.list) prevMax[t.name] = topicTotals(t).max;
  $("t-rows").replaceChildren(...cur.list.map((t) => {
    const tot = topicTotals(t);
    return el("tr", { "data-topic": t.name },
      el("td", {}, t.name), el("td", { class: "queues" }, t.queues), el("td", {}, t.perm),
      el("td", { class: "messages" }, fmt(tot.msgs)),
      el("td", { class: "offsets" }, t.queueOffsets.map((q) => `${q.queueId}:${q.minOffset}/${q.maxOffset}`).join(" ")),
      el("td", { class: "produced" }, rate(tot.max, prevMax[t.name], dt)),
      el("td", { class: "consumed" }, rate(cur.committed[t.name] || 0, prevCommitted[t.name], dt)),
      el("td", {}, el("button", { class: "delete", onclick: () => confirmThen(`Delete topic ${t.name} and every message in it?`,
        () => postJSON("/api/topics/delete", { name: t.name })) }, "Delete…")));
  }));
}

// ---- groups ----

function renderGroups() {
  const groups = state.groups;
  if (!groups) return;
  const list = $("g-list");
  if (groups.length === 0) { list.replaceChildren(el("p", {}, "No consumer group has committed an offset yet.")); return; }
  list.replaceChildren(...groups.map((g) => {
    const name = g.summary.group;
    const rows = g.queues.queues.map((q) => el("tr", { "data-queue": `${q.topic}/${q.queueId}` },
      el("td", {}, q.topic), el("td", {}, q.queueId),
      el("td", { class: "committed" }, q.committed ? q.committedOffset : "none"),
      el("td", {}, q.maxOffset), el("td", { class: "lag" }, q.lag)));
    const topicSel = el("select", { class: "reset-topic" }, ...g.summary.topics.map((t) => el("option", { value: t }, t)));
    const toSel = el("select", { class: "reset-to" }, el("option", { value: "earliest" }, "earliest"), el("option", { value: "latest" }, "latest"));
    return el("div", { class: "group", "data-group": name },
      el("h3", {}, name, " ", el("span", { class: "group-lag" }, `lag ${fmt(g.summary.lag)}`)),
      el("p", { class: "members" }, g.members.length ? `members: ${g.members.join(", ")}` : "members: none live over the gRPC API"),
      el("table", { class: "grid" }, el("thead", {}, el("tr", {}, ...["topic", "queue", "committed", "max offset", "lag"].map((h) => el("th", {}, h)))),
        el("tbody", {}, ...rows)),
      el("div", { class: "admin" }, "Reset offsets of ", topicSel, " to ", toSel, " ",
        el("button", { class: "reset", onclick: () => confirmThen(`Reset group ${name} in ${topicSel.value} to ${toSel.value}?`,
          () => postJSON("/api/groups/reset", { group: name, topic: topicSel.value, to: toSel.value })) }, "Reset…")));
  }));
  drawLines($("g-chart"), Object.entries(state.lagHistory).map(([name, ys]) => ({ name, ys })), "lag (messages)");
}

// ---- lookup ----

function decodeBody(b64) {
  const bin = atob(b64 || "");
  const bytes = Uint8Array.from(bin, (c) => c.charCodeAt(0));
  try { return new TextDecoder("utf-8", { fatal: true }).decode(bytes); } catch (_) {
    return [...bytes.slice(0, 256)].map((x) => x.toString(16).padStart(2, "0")).join(" ") + (bytes.length > 256 ? " …" : "");
  }
}

async function lookup(ev) {
  ev.preventDefault();
  const by = $("l-by").value, v = $("l-value").value.trim();
  const p = new URLSearchParams();
  if ($("l-topic").value.trim()) p.set("topic", $("l-topic").value.trim());
  if (by === "offset") { p.set("queue", $("l-queue").value.trim()); p.set("offset", v); } else p.set(by, v);
  const out = $("l-result");
  try {
    const res = await getJSON("/api/messages?" + p);
    if (res.messages.length === 0) { out.replaceChildren(el("p", { class: "none" }, "No message found.")); return; }
    out.replaceChildren(...res.messages.map((m) => el("div", { class: "message", "data-msgid": m.msgId },
      el("table", { class: "kv" },
        ...[["msgId", m.msgId], ["offset msgId", m.offsetMsgId], ["topic", m.topic], ["queue", m.queueId], ["queue offset", m.queueOffset],
          ["commitlog offset", m.physicalOffset], ["born", new Date(num(m.bornTimestamp)).toISOString()],
          ["stored", new Date(num(m.storeTimestamp)).toISOString()], ["born host", m.bornHost], ["store host", m.storeHost],
          ["reconsume times", m.reconsumeTimes]].map(([k, val]) => el("tr", {}, el("th", {}, k), el("td", { "data-field": k }, val)))),
      el("h4", {}, "Properties"),
      el("table", { class: "kv props" }, ...m.properties.map((p) => el("tr", {}, el("th", {}, p.key), el("td", { "data-prop": p.key }, p.value)))),
      el("h4", {}, "Body"),
      el("pre", { class: "body" }, decodeBody(m.body)))));
  } catch (err) {
    out.replaceChildren(el("p", { class: "none" }, err.message));
  }
}

// ---- live ----

function quantile(buckets, prev, q) {
  // buckets: cumulative counts per upper bound (seconds); the counts over
  // one refresh are the differences; interpolate within the bucket.
  const d = buckets.map((b, i) => ({ le: b.le, c: b.count - (prev && prev[i] ? prev[i].count : 0) }));
  const total = d.length ? d[d.length - 1].c : 0;
  if (total <= 0) return null;
  const target = q * total;
  let lo = 0, below = 0;
  for (const b of d) {
    if (b.c >= target) {
      if (!Number.isFinite(b.le)) return lo * 1000;
      const frac = b.c === below ? 1 : (target - below) / (b.c - below);
      return (lo + (b.le - lo) * frac) * 1000;
    }
    lo = b.le; below = b.c;
  }
  return lo * 1000;
}

function renderLive() {
  const ms = state.metrics;
  if (ms.length === 0) return;
  const last = ms[ms.length - 1], prev = ms[ms.length - 2];
  $("m-total").textContent = fmt(last.storeMessages);
  $("m-produced").textContent = fmt(last.produceMessages);
  if (!prev) return;
  const dt = (last.timeMs - prev.timeMs) / 1000;
  $("m-rate").textContent = fmt(Math.round((last.storeMessages - prev.storeMessages) / dt));
  $("m-mbps").textContent = ((last.storeBytes - prev.storeBytes) / dt / 1e6).toFixed(2);
  const lead = state.status && state.status.state === "Leader";
  const p50 = quantile(last.commitBuckets, prev.commitBuckets, 0.5), p99 = quantile(last.commitBuckets, prev.commitBuckets, 0.99);
  $("m-p50").textContent = !lead ? "measured on the leader" : p50 === null ? "no sends" : `${p50.toFixed(1)} ms`;
  $("m-p99").textContent = !lead ? "measured on the leader" : p99 === null ? "no sends" : `${p99.toFixed(1)} ms`;
  const rates = [], p50s = [], p99s = [];
  for (let i = 1; i < ms.length; i++) {
    const s = (ms[i].timeMs - ms[i - 1].timeMs) / 1000;
    rates.push((ms[i].storeMessages - ms[i - 1].storeMessages) / s);
    p50s.push(quantile(ms[i].commitBuckets, ms[i - 1].commitBuckets, 0.5) || 0);
    p99s.push(quantile(ms[i].commitBuckets, ms[i - 1].commitBuckets, 0.99) || 0);
  }
  drawLines($("m-chart"), [{ name: "messages stored /s", ys: rates }], "msgs/s");
  $("m-chart").dataset.samples = String(rates.length);
  drawLines($("m-lat"), [{ name: "p50 ms", ys: p50s }, { name: "p99 ms", ys: p99s }], "commit latency (ms)");
}

// ---- charts ----

const COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2"];

function drawLines(canvas, series, title) {
  const g = canvas.getContext("2d"), w = canvas.width, h = canvas.height, pad = 40;
  g.clearRect(0, 0, w, h);
  g.fillStyle = "#333"; g.font = "12px sans-serif"; g.fillText(title, pad, 14);
  const maxY = Math.max(1, ...series.flatMap((s) => s.ys));
  g.strokeStyle = "#ccc"; g.beginPath(); g.moveTo(pad, pad / 2); g.lineTo(pad, h - pad / 2); g.lineTo(w - 10, h - pad / 2); g.stroke();
  g.fillText(maxY.toFixed(0), 2, pad / 2 + 10); g.fillText("0", 2, h - pad / 2);
  series.forEach((s, i) => {
    g.strokeStyle = COLORS[i % COLORS.length]; g.beginPath();
    s.ys.forEach((y, j) => {
      const x = pad + ((w - pad - 10) * j) / Math.max(1, HISTORY - 1), yy = h - pad / 2 - ((h - pad) * y) / maxY;
      if (j === 0) g.moveTo(x, yy); else g.lineTo(x, yy);
    });
    g.stroke();
    g.fillStyle = COLORS[i % COLORS.length]; g.fillText(s.name, w - 200, 14 + 14 * i);
  });
}

// ---- refresh loop ----

let refreshing = false;

async function refresh() {
  if (refreshing) return;
  refreshing = true;
  try {
    const s = await getJSON("/api/status");
    state.status = s;
    renderStatus(s);
    if (state.page === "topics" || state.page === "groups") {
      const [t, g] = await Promise.all([getJSON("/api/topics"), getJSON("/api/groups").catch(() => ({ groups: [] }))]);
      state.prevTopics = state.topics;
      state.topics = { at: Date.now(), list: t.topics, committed: committedByTopic(g.groups) };
      state.groups = g.groups;
      for (const grp of g.groups) {
        const h = (state.lagHistory[grp.summary.group] = state.lagHistory[grp.summary.group] || []);
        h.push(num(grp.summary.lag));
        if (h.length > HISTORY) h.shift();
      }
      renderTopics();
      renderGroups();
    }
    const m = await getJSON("/api/metrics");
    state.metrics.push(m);
    if (state.metrics.length > HISTORY) state.metrics.shift();
    if (state.page === "live") renderLive();
    document.body.dataset.refreshed = String(Date.now());
    showError("");
  } catch (err) {
    showError(`refresh failed: ${err.message}`);
  } finally {
    refreshing = false;
  }
}

function showPage() {
  state.page = (location.hash || "#cluster").slice(1);
  for (const p of document.querySelectorAll(".page")) p.hidden = p.id !== "page-" + state.page;
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.id === "tab-" + state.page);
  refresh();
}

$("transfer-btn").onclick = () => {
  const to = $("transfer-to").value;
  confirmThen(`Transfer leadership to ${to || "any voter"}?`, () => postJSON("/api/transfer", { id: to }));
};
$("create-btn").onclick = () => {
  const name = $("new-topic").value.trim(), queues = Number($("new-queues").value);
  confirmThen(`Create topic ${name} with ${queues} queues?`, () => postJSON("/api/topics", { name, queues }));
};
$("lookup-form").addEventListener("submit", lookup);
window.addEventListener("hashchange", showPage);
showPage();
setInterval(refresh, REFRESH_MS);
