// The console's live part: subscribe to GET /events, keep a few minutes of history for the
// sparklines, render each snapshot with render.js, and send the forms and buttons to the admin
// endpoint's own routes (their error, if any, is shown as it came).
"use strict";

const HISTORY_MS = 5 * 60 * 1000;   // what a sparkline covers
const SAMPLE_MS = 2000;             // a point at least this often, so flat lines extend
const history = {};                 // key -> [[time, value], ...]
let latest = null;                  // the last snapshot, and when it arrived (ages extrapolate from it)
let receivedAt = 0;
let source = null;

const $ = (id) => document.getElementById(id);

function showError(text) {
  $("error-text").textContent = text;
  $("error").hidden = false;
}
$("error-close").addEventListener("click", () => { $("error").hidden = true; });

function record(now) {
  if (!latest || latest.error) return;
  const add = (key, value) => {
    const points = history[key] || (history[key] = []);
    points.push([now, value]);
    while (points.length && points[0][0] < now - HISTORY_MS) points.shift();
  };
  for (const p of latest.partitions) add(`hw:${p.topic}-${p.partition}`, p.high_watermark);
  for (const g of latest.groups) {
    add(`lag:${g.group_id}`, g.lag);
    for (const o of g.offsets) add(`lag:${g.group_id}:${o.topic}-${o.partition}`, o.lag ?? 0);
  }
  for (const r of latest.faults) add(`fired:${r.id}`, r.fired);
  add("txn:open", latest.transactions.filter((t) => t.state === "Ongoing").length);
}

function render() {
  if (!latest) return;
  if (latest.error) { showError(`the snapshot failed: ${latest.error}`); return; }
  if ($("error-text").textContent.startsWith("the snapshot failed")) $("error").hidden = true;  // it works again
  const s = latest.status;
  const broker = $("broker");
  broker.dataset.state = s.running ? "running" : "stopped";
  broker.textContent = latest.cluster ? clusterHeadline(s, latest.cluster)
    : `node ${s.node_id} ${s.running ? "running" : "stopped"} on ${s.bootstrap} · ${s.crashes} crash(es), ${s.restarts} restart(s)`;
  const f = latest.feed;
  $("feed-cost").textContent = `snapshot every ${f.interval_ms} ms while watched, ${f.build_ms} ms to build, ${f.subscribers} page(s) open`;
  const nowMs = latest.now_ms + (Date.now() - receivedAt);
  $("partitions").innerHTML = renderPartitions(latest.partitions, history, HISTORY_MS);
  $("producers").innerHTML = renderProducers(latest.partitions);
  $("transactions").innerHTML = renderTransactions(latest.transactions, nowMs);
  $("txn-spark").innerHTML = `<small>open ${spark(history["txn:open"], HISTORY_MS)}</small>`;
  $("groups").innerHTML = renderGroups(latest.groups, history, HISTORY_MS);
  $("faults").innerHTML = renderFaults(latest.faults, history, HISTORY_MS);
  // GET /cluster's body once the broker runs as a cluster (absent for one broker): the cluster
  // view shows, and the single broker's controls (which a cluster answers 409) hide
  $("cluster-view").hidden = !latest.cluster;
  for (const e of document.querySelectorAll("[data-single]")) e.hidden = !!latest.cluster;
  for (const e of document.querySelectorAll("[data-cluster]")) e.hidden = !latest.cluster;
  if (latest.cluster) $("cluster").innerHTML = renderCluster(latest.cluster);
}

// The header of a cluster: how many brokers are up (every one active: "running"), the controller.
function clusterHeadline(s, c) {
  const up = c.brokers.filter((b) => b.state === "active").length;
  return `cluster of ${c.brokers.length} brokers, ${up} active, controller ${c.controller} ${s.running ? "running" : "degraded"}` +
    ` on ${s.bootstrap} · ${s.crashes} crash(es), ${s.restarts} restart(s)`;
}

function setConnection(state) {
  const c = $("connection");
  c.dataset.state = state;
  c.textContent = state;
}

// EventSource reconnects by itself after a dropped stream; when it gives up (the endpoint was
// gone long enough to refuse), a new one is opened after a pause.
function connect() {
  source = new EventSource("/events");
  source.addEventListener("open", () => setConnection("live"));
  source.addEventListener("snapshot", (e) => {
    latest = JSON.parse(e.data);
    receivedAt = Date.now();
    record(receivedAt);
    render();
  });
  source.addEventListener("error", () => {
    setConnection("reconnecting");
    if (source.readyState === EventSource.CLOSED) setTimeout(connect, 1000);
  });
}

setInterval(() => { record(Date.now()); render(); }, SAMPLE_MS);

// Send one request to the endpoint; its JSON error (or the network's) is shown, never thrown.
async function call(method, path, body) {
  try {
    const r = await fetch(path, {method, headers: {"Content-Type": "application/json"},
      body: body === undefined ? undefined : JSON.stringify(body)});
    const text = await r.text();
    let data = null;
    try { data = JSON.parse(text); } catch (err) { data = {error: text}; }
    if (!r.ok) { showError(`${method} ${path}: ${r.status} ${data && data.error ? data.error : text}`); return null; }
    $("error").hidden = true;
    return data;
  } catch (err) {
    showError(`${method} ${path}: ${err}`);
    return null;
  }
}

// A form's filled-in fields as a JSON body; fields that look like numbers are sent as numbers.
function fields(form, numeric) {
  const body = {};
  for (const [name, value] of new FormData(form)) {
    const v = String(value).trim();
    if (v === "") continue;
    body[name] = numeric.includes(name) && /^-?\d+$/.test(v) ? Number(v) : v;
  }
  return body;
}

document.addEventListener("click", (e) => {
  const b = e.target.closest("button[data-post], button[data-delete]");
  if (!b) return;
  if (b.dataset.delete) call("DELETE", b.dataset.delete);
  else call("POST", b.dataset.post, b.dataset.body ? JSON.parse(b.dataset.body) : undefined);
});

$("partition-form").addEventListener("submit", (e) => {
  e.preventDefault();
  call("POST", e.submitter.dataset.path, fields(e.target, ["partition"]));
});
$("topic-form").addEventListener("submit", (e) => {
  e.preventDefault();
  call("POST", "/topics", fields(e.target, ["partitions", "replication_factor"]));
});
// POST /topics/<topic>/<partition>/leader {"broker": id}: what the topic and partition fields hold
// goes into the path as typed (escaped), so the endpoint says what is wrong with them
$("leader-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const f = fields(e.target, ["broker"]);
  const path = `/topics/${encodeURIComponent(f.topic ?? "")}/${encodeURIComponent(f.partition ?? "")}/leader`;
  call("POST", path, f.broker === undefined ? {} : {broker: f.broker});
});
$("fault-form").addEventListener("submit", (e) => {
  e.preventDefault();
  call("POST", "/faults", fields(e.target, ["partition", "n", "delay_ms"]));  // "next:2" is the endpoint's to read
});
$("fault-json-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const text = new FormData(e.target).get("json");
  let body;
  try { body = JSON.parse(text); } catch (err) { showError(`not JSON: ${err.message}`); return; }
  call("POST", "/faults", body);
});

connect();
