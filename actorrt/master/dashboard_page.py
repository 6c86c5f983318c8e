"""The dashboard's page (``_dashboard.py`` serves it): HTML, CSS and the script that renders
``/api/status`` into tables and fetches it again every ``refresh_s`` seconds.

No framework and nothing fetched from elsewhere (the page works offline and under a strict
Content-Security-Policy). The script writes every value with ``textContent``, never as HTML, so
a class name or a death cause cannot inject markup. Elements the tests read carry ids
(``#nodes``, ``#actors``, ``#clients``, ``#deaths``) and rows carry ``data-actor-id``.
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
<h2>Nodes</h2>
<table>
  <thead><tr><th>node</th><th>worker</th><th>address</th><th>slots used</th><th>slots free</th><th>ready</th>
  <th>load 1m</th><th>actors' memory / node memory</th><th>gpus</th><th>state</th></tr></thead>
  <tbody id="nodes"></tbody>
</table>
<h2>Actors <span id="actors-count" class="muted"></span></h2>
<table>
  <thead><tr><th>actor</th><th>class</th><th>name</th><th>node</th><th>age</th><th>memory</th><th>limit</th>
  <th title="not known to the master: see the note below">calls/s</th><th>holders</th><th>restarts</th>
  <th>client</th></tr></thead>
  <tbody id="actors"></tbody>
</table>
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
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin-top: 14px; }
.card { border: 1px solid #d8dde6; border-radius: 8px; padding: 8px 14px; min-width: 110px; background: #f8fafc; }
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
footer { margin-top: 24px; }
"""

PAGE_JS = r"""
"use strict";
(function () {
  const MAX_ROWS = 1000;

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
      card("uptime", duration(st.uptime_s)),
    );

    fill("nodes", st.nodes.map((n) => {
      const slots = el("td", n.cpus_used + " / " + n.cpus);
      slots.appendChild(bar(n.cpus ? n.cpus_used / n.cpus : 0));
      const mem = el("td", mib(n.actors_rss_bytes) + " / " + mib(n.memory_bytes));
      mem.appendChild(bar(n.memory_bytes ? n.actors_rss_bytes / n.memory_bytes : 0));
      return row([
        n.node, n.worker_id, n.node_ip, slots, n.cpus_free, n.slots_ready, Number(n.load).toFixed(2), mem,
        n.gpus_used + " / " + n.gpus, n.connected ? "connected" : el("td", "reconnecting", "lost"),
      ], { "data-worker-id": n.worker_id });
    }), 10, "no node has joined: actorrt connect --address " + st.address);

    document.getElementById("actors-count").textContent =
      st.actors.length > MAX_ROWS ? "(showing " + MAX_ROWS + " of " + st.actors.length + ")" : "";
    fill("actors", st.actors.slice(0, MAX_ROWS).map((a) => {
      const limitMb = a.resources ? Number(a.resources.max_memory_mb) : 0;
      const limit = limitMb ? limitMb + " MiB" : "-";
      const calls = el("td", a.calls_per_s === null ? "n/a" : Number(a.calls_per_s).toFixed(1));
      calls.title = st.notes.calls_per_s;
      const name = (a.name || "-") + (a.detached ? " (detached)" : "");
      let restarts = a.max_restarts ? a.restarts + " of " + (a.max_restarts < 0 ? "unlimited" : a.max_restarts) : "-";
      if (a.restarting) restarts += " (restarting)";
      return row([
        a.actor_id, a.class_name, name, a.restarting ? "-" : a.node, duration(a.age_s), mib(a.rss_bytes), limit,
        calls, a.holders, restarts, a.client_id || "(none: detached)",
      ], { "data-actor-id": a.actor_id });
    }), 11, "no live actor");

    fill("clients", st.clients.map((c) => row([
      c.client_id, c.hostname, c.pid, c.actors,
      c.connected ? "connected" : el("td", "lost (grace period)", "lost"),
    ], { "data-client-id": c.client_id })), 5, "no client");

    document.getElementById("deaths-count").textContent =
      st.deaths_kept > st.deaths.length ? "(latest " + st.deaths.length + " of " + st.deaths_kept + " kept)" : "";
    fill("deaths", st.deaths.map((d) => row([
      d.ago_s === null ? "before the dashboard started" : duration(d.ago_s) + " ago",
      d.actor_id, d.class_name, d.node, el("td", d.cause, "cause"),
    ], { "data-actor-id": d.actor_id })), 5, "no actor has died");

    document.getElementById("notes").replaceChildren(
      el("div", st.notes.calls_per_s), el("div", st.notes.age_s),
    );
  }

  async function refresh() {
    const state = document.getElementById("state");
    let every = 2;
    try {
      const response = await fetch("/api/status", { cache: "no-store" });
      if (!response.ok) throw new Error("HTTP " + response.status);
      const st = await response.json();
      every = st.refresh_s || every;
      render(st);
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
