"""The dashboard's page (``dashboard.py`` serves it): HTML, CSS and the script that renders
``/api/status`` into tables and two history lines (inline SVG) and fetches it again every
``refresh_s`` seconds; a click on an actor (live, or among the deaths) shows its last lines
from ``/api/actors/<id>/log``, fetched again with each refresh while it is shown.

No framework and nothing fetched from elsewhere (the page works offline and under a strict
Content-Security-Policy). The script writes every value with ``textContent``, never as HTML, so
a class name, a death cause or an actor's output cannot inject markup. Elements the tests read
carry ids (``#nodes``, ``#actors``, ``#clients``, ``#deaths``, ``#history-cpu``,
``#history-calls``, ``#log-box``, ``#log-text``) and rows carry ``data-actor-id``.
"""

from __future__ import annotations

__all__ = ["PAGE_CSS", "PAGE_HTML", "PAGE_JS"]

PAGE_HTML = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>actorrt cluster</title>
<link rel="stylesheet" href="/dashboard.css">
<script src="/dashboard.js" defer></script>
</head>
<body>
<header>
  <h1>actorrt <span id="address"></span></h1>
  <div id="state" class="muted">loading...</div>
</header>
<section id="summary" class="cards"></section>
<h2>Last 10 minutes <span id="history-note" class="muted"></span></h2>
<div class="charts">
  <figure><figcaption>cluster CPU <b id="history-cpu-now"></b> <span class="muted">of 100%</span></figcaption>
  <svg id="history-cpu" class="chart" viewBox="0 0 600 80" preserveAspectRatio="none"></svg></figure>
  <figure><figcaption>calls/s <b id="history-calls-now"></b> <span id="history-calls-top" class="muted"></span>
  </figcaption><svg id="history-calls" class="chart" viewBox="0 0 600 80" preserveAspectRatio="none"></svg></figure>
</div>
<h2>Nodes</h2>
<table>
  <thead><tr><th>node</th><th>worker</th><th>address</th><th>slots used</th><th>slots free</th><th>ready</th>
  <th title="of all the node's cores">CPU</th><th>load 1m</th><th>memory used / node memory</th>
  <th>actors' memory</th><th>gpus</th><th>state</th></tr></thead>
  <tbody id="nodes"></tbody>
</table>
<h2>Actors <span id="actors-count" class="muted"></span></h2>
<table>
  <thead><tr><th>actor</th><th>class</th><th>name</th><th>node</th><th>age</th>
  <th title="of one core, over its process tree">CPU</th><th>calls/s</th><th>memory</th><th>limit</th>
  <th>holders</th><th>restarts</th><th>client</th></tr></thead>
  <tbody id="actors"></tbody>
</table>
<section id="log-box" hidden>
  <h2>Output of <span id="log-title"></span> <span id="log-state" class="muted"></span>
  <button id="log-close" type="button">close</button></h2>
  <pre id="log-text"></pre>
</section>
<h2>Clients</h2>
<table>
  <thead><tr><th>client</th><th>host</th><th>pid</th><th>actors</th><th>state</th></tr></thead>
  <tbody id="clients"></tbody>
</table>
<h2>Recent deaths <span id="deaths-count" class="muted"></span></h2>
<table>
  <thead><tr><th>when</th><th>actor</th><th>class</th><th>node</th><th>cause</th></tr></thead>
  <tbody id="deaths"></tbody>
</table>
<footer id="notes" class="muted"></footer>
</body>
</html>
"""

PAGE_CSS = """
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 24px 24px; color: #1d2330; }
header { display: flex; align-items: baseline; gap: 16px; border-bottom: 1px solid #d8dde6; }
h1 { font-size: 20px; margin: 14px 0 10px; }
h1 span { font-weight: normal; color: #566; }
h2 { font-size: 16px; margin: 22px 0 6px; }
.muted { color: #667085; font-weight: normal; font-size: 13px; }
.error { color: #b42318; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin-top: 14px; }
.card { border: 1px solid #d8dde6; border-radius: 8px; padding: 6px 12px; min-width: 80px; background: #f8fafc; }
.card b { display: block; font-size: 20px; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 4px 10px 4px 0; border-bottom: 1px solid #eef1f5; white-space: nowrap; }
th { font-size: 12px; color: #475467; font-weight: 600; }
td.cause { white-space: normal; }
td.num, th.num { text-align: right; }
.bar { display: inline-block; width: 80px; height: 8px; background: #eef1f5; border-radius: 4px;
       vertical-align: middle; margin-left: 6px; overflow: hidden; }
.bar i { display: block; height: 100%; background: #2e90fa; }
.lost { color: #b42318; }
tr.empty td { color: #98a2b3; font-style: italic; }
tbody.clickable tr[data-actor-id] { cursor: pointer; }
tbody.clickable tr[data-actor-id]:hover td { background: #f2f6fc; }
tr.selected td { background: #e8f1fd; }
.charts { display: flex; gap: 16px; }
.charts figure { flex: 1; margin: 0; }
.charts figcaption { font-size: 13px; color: #475467; margin-bottom: 2px; }
.chart { display: block; width: 100%; height: 70px; background: #f8fafc; border: 1px solid #d8dde6;
         border-radius: 6px; }
.chart polyline { fill: none; stroke: #2e90fa; stroke-width: 2px; vector-effect: non-scaling-stroke; }
.chart line { stroke: #eef1f5; stroke-width: 1px; vector-effect: non-scaling-stroke; }
#log-box pre { background: #101828; color: #e4e7ec; padding: 10px 12px; border-radius: 6px; max-height: 240px;
               overflow: auto; margin: 0; font: 12px/1.45 ui-monospace, "SFMono-Regular", Menlo, monospace;
               white-space: pre-wrap; word-break: break-all; }
#log-box button { font-size: 12px; margin-left: 8px; }
footer { margin-top: 24px; }
"""

PAGE_JS = r"""
"use strict";
(function () {
  const MAX_ROWS = 1000;
  const LOG_LINES = 200;
  const SVG = "http://www.w3.org/2000/svg";
  let logActor = null; // the actor whose output is shown
  let logsOn = true;
  let logBusy = false;

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function row(cells, attrs) {
    const tr = document.createElement("tr");
    for (const c of cells) tr.appendChild(c instanceof Node ? c : el("td", c));
    for (const [k, v] of Object.entries(attrs || {})) tr.setAttribute(k, v);
    return tr;
  }
  function fill(id, rows, columns, empty) {
    const body = document.getElementById(id);
    body.replaceChildren(...rows);
    if (!rows.length) {
      const td = el("td", empty);
      td.colSpan = columns;
      body.appendChild(row([td], { class: "empty" }));
    }
  }
  function mib(bytes) {
    const n = Number(bytes) / 1048576;
    return n >= 10240 ? (n / 1024).toFixed(1) + " GiB" : n.toFixed(n < 10 ? 1 : 0) + " MiB";
  }
  function duration(s) {
    if (s === null || s === undefined) return "?";
    s = Math.floor(s);
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m" + String(s % 60).padStart(2, "0") + "s";
    if (s < 86400) return Math.floor(s / 3600) + "h" + String(Math.floor(s % 3600 / 60)).padStart(2, "0") + "m";
    return Math.floor(s / 86400) + "d" + String(Math.floor(s % 86400 / 3600)).padStart(2, "0") + "h";
  }
  function bar(fraction) {
    const b = el("span", null, "bar");
    const i = document.createElement("i");
    i.style.width = Math.max(0, Math.min(100, fraction * 100)).toFixed(0) + "%";
    b.appendChild(i);
    return b;
  }
  function percent(v) {
    v = Number(v) || 0;
    return (v < 10 ? v.toFixed(1) : v.toFixed(0)) + "%";
  }
  function rate(v) {
    v = Number(v) || 0;
    return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2);
  }
  function svg(tag, attrs) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
    return e;
  }
  // One history line: x is time (the chart spans the history's span, the newest point on the
  // right), y the value over [0, top].
  function chart(id, history, key, top, now) {
    const W = 600, H = 80, PAD = 4;
    const points = history.points.map((p) => {
      const x = W - Math.max(0, Math.min(W, (now - p.t) / history.span_s * W));
      const y = H - PAD - Math.max(0, Math.min(1, Number(p[key]) / top)) * (H - 2 * PAD);
      return x.toFixed(1) + "," + y.toFixed(1);
    });
    const grid = [0.25, 0.5, 0.75].map((f) => svg("line", { x1: 0, x2: W, y1: H * f, y2: H * f }));
    document.getElementById(id).replaceChildren(...grid, svg("polyline", { points: points.join(" ") }));
  }
  function history(st) {
    const h = st.history;
    const top = Math.max(1, ...h.points.map((p) => Number(p.calls_per_s))) * 1.1;
    chart("history-cpu", h, "cpu_percent", 100, st.generated_at);
    chart("history-calls", h, "calls_per_s", top, st.generated_at);
    document.getElementById("history-cpu-now").textContent = percent(st.cluster.cpu_percent);
    document.getElementById("history-calls-now").textContent = rate(st.cluster.calls_per_s);
    document.getElementById("history-calls-top").textContent = "(top of the chart: " + rate(top) + ")";
    document.getElementById("history-note").textContent = h.points.length
      ? "(one point per " + h.period_s + " s: its mean)"
      : "(the first point comes " + h.period_s + " s after the dashboard started)";
  }
  function card(label, value) {
    const c = el("div", null, "card");
    c.appendChild(el("b", value));
    c.appendChild(document.createTextNode(label));
    return c;
  }

  function render(st) {
    document.getElementById("address").textContent = st.address;
    const connected = st.clients.filter((c) => c.connected).length;
    document.getElementById("summary").replaceChildren(
      card("nodes", st.nodes.length),
      card("slots used", st.slots.used + " / " + st.slots.total),
      card("slots free", st.slots.free),
      card("actors", st.actors.length),
      card("clients", st.clients.length + (connected < st.clients.length ? " (" + connected + " connected)" : "")),
      card("placements waiting", st.placements_waiting),
      card("cluster CPU", percent(st.cluster.cpu_percent)),
      card("calls/s", rate(st.cluster.calls_per_s)),
      card("uptime", duration(st.uptime_s)),
    );
    history(st);

    fill("nodes", st.nodes.map((n) => {
      const slots = el("td", n.cpus_used + " / " + n.cpus);
      slots.appendChild(bar(n.cpus ? n.cpus_used / n.cpus : 0));
      const cpu = el("td", percent(n.cpu_percent), "cpu");
      cpu.appendChild(bar(Number(n.cpu_percent) / 100));
      const used = Number(n.memory_used_bytes);
      const mem = el("td", mib(used) + " / " + mib(n.memory_bytes), "memory");
      mem.appendChild(bar(n.memory_bytes ? used / n.memory_bytes : 0));
      return row([
        n.node, n.worker_id, n.node_ip, slots, n.cpus_free, n.slots_ready, cpu, Number(n.load).toFixed(2), mem,
        mib(n.actors_rss_bytes), n.gpus_used + " / " + n.gpus,
        n.connected ? "connected" : el("td", "reconnecting", "lost"),
      ], { "data-worker-id": n.worker_id });
    }), 12, "no node has joined: actorrt connect --address " + st.address);

    document.getElementById("actors-count").textContent =
      st.actors.length > MAX_ROWS ? "(showing " + MAX_ROWS + " of " + st.actors.length + ")" : "";
    fill("actors", st.actors.slice(0, MAX_ROWS).map((a) => {
      const limitMb = a.resources ? Number(a.resources.max_memory_mb) : 0;
      const limit = limitMb ? limitMb + " MiB" : "-";
      const cpu = el("td", percent(a.cpu_percent), "cpu");
      const calls = el("td", rate(a.calls_per_s), "calls");
      cpu.title = calls.title = st.notes.calls_per_s;
      const name = (a.name || "-") + (a.detached ? " (detached)" : "");
      let restarts = a.max_restarts ? a.restarts + " of " + (a.max_restarts < 0 ? "unlimited" : a.max_restarts) : "-";
      if (a.restarting) restarts += " (restarting)";
      return row([
        a.actor_id, a.class_name, name, a.restarting ? "-" : a.node, duration(a.age_s), cpu, calls,
        mib(a.rss_bytes), limit, a.holders, restarts, a.client_id || "(none: detached)",
      ], { "data-actor-id": a.actor_id, class: a.actor_id === logActor ? "selected" : "" });
    }), 12, "no live actor");

    fill("clients", st.clients.map((c) => row([
      c.client_id, c.hostname, c.pid, c.actors,
      c.connected ? "connected" : el("td", "lost (grace period)", "lost"),
    ], { "data-client-id": c.client_id })), 5, "no client");

    document.getElementById("deaths-count").textContent =
      st.deaths_kept > st.deaths.length ? "(latest " + st.deaths.length + " of " + st.deaths_kept + " kept)" : "";
    fill("deaths", st.deaths.map((d) => row([
      d.ago_s === null ? "before the dashboard started" : duration(d.ago_s) + " ago",
      d.actor_id, d.class_name, d.node, el("td", d.cause, "cause"),
    ], { "data-actor-id": d.actor_id, class: d.actor_id === logActor ? "selected" : "" })), 5, "no actor has died");

    logsOn = st.actor_logs;
    for (const id of ["actors", "deaths"]) document.getElementById(id).classList.toggle("clickable", logsOn);
    document.getElementById("notes").replaceChildren(
      el("div", st.notes.calls_per_s), el("div", st.notes.age_s),
      el("div", logsOn ? "click an actor (or a death) for its last " + LOG_LINES + " lines of output"
        : "actors' output is not shown here: this dashboard runs with --no-dashboard-logs"),
    );
  }

  // ---- an actor's output ----
  async function showLog() {
    if (logActor === null || logBusy) return;
    logBusy = true;
    const actor = logActor;
    const state = document.getElementById("log-state");
    document.getElementById("log-box").hidden = false;
    try {
      const response = await fetch("/api/actors/" + encodeURIComponent(actor) + "/log?lines=" + LOG_LINES,
        { cache: "no-store" });
      const body = await response.json();
      if (actor !== logActor) return; // another was clicked meanwhile
      if (!response.ok) {
        state.className = "error";
        state.textContent = body.error || "HTTP " + response.status;
        if (response.status !== 429 && response.status !== 503) {
          document.getElementById("log-title").textContent = actor;
          document.getElementById("log-text").textContent = "";
        }
        return;
      }
      document.getElementById("log-title").textContent = body.class_name + " " + body.actor_id +
        (body.alive ? " on " + body.node : " (ended: " + body.cause + ")");
      const pre = document.getElementById("log-text");
      const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4; // else the reader scrolled up
      pre.textContent = body.lines.length ? body.lines.join("\n") : "(it has printed nothing)";
      if (atEnd) pre.scrollTop = pre.scrollHeight; // the newest line in view
      state.className = "muted";
      state.textContent = (body.more ? "its last " : "all ") + body.lines.length + " lines, at " +
        new Date().toLocaleTimeString();
    } catch (e) {
      state.className = "error";
      state.textContent = "the master does not answer (" + e.message + ")";
    } finally {
      logBusy = false;
    }
    if (logActor !== null && logActor !== actor) showLog(); // clicked while this one was read
  }
  function clicked(event) {
    const tr = event.target.closest("tr[data-actor-id]");
    if (!tr || !logsOn) return;
    logActor = tr.dataset.actorId;
    for (const r of document.querySelectorAll("tr.selected")) r.classList.remove("selected");
    tr.classList.add("selected");
    document.getElementById("log-title").textContent = logActor;
    document.getElementById("log-text").textContent = "";
    document.getElementById("log-state").textContent = "reading...";
    showLog();
  }
  document.getElementById("actors").addEventListener("click", clicked);
  document.getElementById("deaths").addEventListener("click", clicked);
  document.getElementById("log-close").addEventListener("click", () => {
    logActor = null;
    document.getElementById("log-box").hidden = true;
    for (const r of document.querySelectorAll("tr.selected")) r.classList.remove("selected");
  });

  async function refresh() {
    const state = document.getElementById("state");
    let every = 2;
    try {
      const response = await fetch("/api/status", { cache: "no-store" });
      if (!response.ok) throw new Error("HTTP " + response.status);
      const st = await response.json();
      every = st.refresh_s || every;
      render(st);
      if (logActor !== null) showLog();
      state.className = "muted";
      state.textContent = "updated " + new Date(st.generated_at * 1000).toLocaleTimeString() +
        ", every " + every + "s";
    } catch (e) {
      state.className = "error";
      state.textContent = "the master does not answer (" + e.message + "); trying again";
    }
    setTimeout(refresh, every * 1000);
  }
  refresh();
})();
"""
