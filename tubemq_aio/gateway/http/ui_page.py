"""The ``/ui`` page: plain HTML and JavaScript, no build step, nothing loaded from another host.

It asks for an API key (kept in the tab's ``sessionStorage`` only), checks that the key has an
``admin:`` scope (``GET /ui/session``), lists topics (``GET /v1/topics``) and groups
(``GET /v1/groups``), and tails a group through ``GET /v1/groups/{g}/stream``, acking each
batch once it is shown (``POST /v1/leases/{token}/ack``). The stream is read with ``fetch``, not
``EventSource``, because ``EventSource`` cannot send an ``Authorization`` header. A fragment
``#key=K&tail=GROUP[&client_id=C]`` connects and starts a tail at once (the fragment never
reaches the server).
"""

from __future__ import annotations

__all__ = ["PAGE"]

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>TubeMQ gateway</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #1d2330; }
  h1 { font-size: 1.3em; margin: 0 0 .6em; }
  h2 { font-size: 1.05em; margin: 1.2em 0 .4em; }
  table { border-collapse: collapse; min-width: 24em; }
  th, td { border-bottom: 1px solid #d9dde6; padding: .25em .8em .25em 0; text-align: left; }
  th { color: #5a6275; font-weight: 600; }
  #status { margin: .6em 0; color: #5a6275; }
  #status.bad { color: #b3261e; }
  #messages { font: 13px/1.35 ui-monospace, monospace; max-height: 32em; overflow: auto; }
  #messages td { white-space: pre-wrap; word-break: break-all; }
  button { font: inherit; padding: .15em .7em; }
  input { font: inherit; }
</style>
</head>
<body>
<h1>TubeMQ gateway</h1>
<form id="login">
  <label>API key <input id="key" type="password" autocomplete="off" size="30"></label>
  <button type="submit">Connect</button>
</form>
<div id="status">Not connected.</div>
<h2>Topics</h2>
<table id="topics"><thead><tr><th>Topic</th><th>Produce</th><th>Groups</th></tr></thead>
<tbody></tbody></table>
<h2>Groups</h2>
<table id="groups"><thead><tr><th>Group</th><th>Mode</th><th>Topics</th><th></th></tr></thead>
<tbody></tbody></table>
<h2>Tail <span id="tailing"></span></h2>
<p><label><input id="ack" type="checkbox" checked> ack each batch once shown</label>
<button id="stop" type="button" disabled>Stop</button>
<span id="count">0 messages</span></p>
<table id="messages"><thead><tr><th>Message id</th><th>Partition</th><th>Value</th></tr></thead>
<tbody></tbody></table>
<script>
"use strict";
const base = location.pathname.replace(/\\/ui\\/?$/, "");
const $ = (id) => document.getElementById(id);
let key = sessionStorage.getItem("tubemq-gw-key") || "";
let tail = null;
let shown = 0;
const MAX_ROWS = 500;

function status(text, bad) {
  $("status").textContent = text;
  $("status").className = bad ? "bad" : "";
}

async function api(method, path) {
  const r = await fetch(base + path, { method, headers: { Authorization: "Bearer " + key } });
  const body = await r.json().catch(() => ({}));
  if (!r.ok) {
    const e = (body && body.error) || {};
    throw new Error(`${method} ${path}: ${r.status} ${e.code || ""} ${e.message || ""}`);
  }
  return body;
}

function cell(row, text) {
  const td = document.createElement("td");
  td.textContent = text;
  row.appendChild(td);
  return td;
}

function fill(id, items, render) {
  const body = $(id).tBodies[0];
  body.replaceChildren();
  for (const item of items) {
    const row = document.createElement("tr");
    render(row, item);
    body.appendChild(row);
  }
}

async function connect() {
  const who = await api("GET", "/ui/session");
  status(`Connected as ${who.name}.`);
  const topics = await api("GET", "/v1/topics");
  fill("topics", topics.topics, (row, t) => {
    cell(row, t.name); cell(row, t.produce ? "yes" : "no"); cell(row, t.groups.join(", "));
  });
  const groups = await api("GET", "/v1/groups");
  fill("groups", groups.groups, (row, g) => {
    cell(row, g.name); cell(row, g.mode); cell(row, g.topics.join(", "));
    const button = document.createElement("button");
    button.textContent = "Tail";
    button.dataset.group = g.name;
    button.onclick = () => startTail(g.name, g.mode === "broadcast" ? uiClient() : null);
    cell(row, "").appendChild(button);
  });
}

function uiClient() {
  return "ui-" + Math.random().toString(36).slice(2, 10);
}

function show(batch) {
  const body = $("messages").tBodies[0];
  for (const m of batch.messages) {
    const row = document.createElement("tr");
    row.className = "message";
    cell(row, m.message_id);
    cell(row, batch.lease.partition_key);
    cell(row, m.encoding === "base64" ? "(base64) " + m.value : m.value);
    body.appendChild(row);
    shown += 1;
  }
  while (body.rows.length > MAX_ROWS) body.deleteRow(0);
  $("count").textContent = `${shown} messages`;
  $("messages").scrollTop = $("messages").scrollHeight;
}

async function handle(event, data) {
  if (event === "batch") {
    show(data);
    if ($("ack").checked) await api("POST", `/v1/leases/${data.lease.token}/ack`);
  } else if (event === "failure") {
    status(`Stream: ${data.error.code}: ${data.error.message}`, true);
  } else if (event === "end") {
    status(`Stream ended (${data.reason}).`);
  }
}

async function startTail(group, clientId) {
  stopTail();
  const controller = new AbortController();
  tail = controller;
  $("tailing").textContent = clientId ? `${group} (client ${clientId})` : group;
  $("stop").disabled = false;
  const query = clientId ? `?client_id=${encodeURIComponent(clientId)}` : "";
  try {
    const r = await fetch(`${base}/v1/groups/${encodeURIComponent(group)}/stream${query}`, {
      headers: { Authorization: "Bearer " + key, Accept: "text/event-stream" },
      signal: controller.signal,
    });
    if (!r.ok) {
      const body = await r.json().catch(() => ({}));
      throw new Error(`stream: ${r.status} ${(body.error && body.error.message) || ""}`);
    }
    status(`Tailing ${group}.`);
    const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let cut;
      while ((cut = buffer.indexOf("\\n\\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        let event = "message";
        const data = [];
        for (const line of block.split("\\n")) {
          if (line.startsWith("event: ")) event = line.slice(7);
          else if (line.startsWith("data: ")) data.push(line.slice(6));
        }
        if (data.length) await handle(event, JSON.parse(data.join("\\n")));
      }
    }
  } catch (err) {
    if (err.name !== "AbortError") status(String(err.message || err), true);
  } finally {
    if (tail === controller) { tail = null; $("stop").disabled = true; }
  }
}

function stopTail() {
  if (tail) tail.abort();
  tail = null;
  $("stop").disabled = true;
}

async function start() {
  try {
    await connect();
    return true;
  } catch (err) {
    status(String(err.message || err), true);
    return false;
  }
}

$("login").onsubmit = (ev) => {
  ev.preventDefault();
  key = $("key").value;
  sessionStorage.setItem("tubemq-gw-key", key);
  start();
};
$("stop").onclick = stopTail;

const hash = new URLSearchParams(location.hash.slice(1));
if (hash.get("key")) {
  key = hash.get("key");
  sessionStorage.setItem("tubemq-gw-key", key);
  history.replaceState(null, "", location.pathname);  // the key leaves the address bar
}
if (key) {
  start().then((ok) => {
    if (ok && hash.get("tail")) startTail(hash.get("tail"), hash.get("client_id"));
  });
}
</script>
</body>
</html>
"""
