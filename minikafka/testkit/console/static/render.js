// The console's views: each function turns a part of the admin endpoint's JSON into HTML.
// Nothing here fetches or keeps state; console.js calls them with each snapshot.
"use strict";

const esc = (v) => String(v ?? "").replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
const table = (head, rows) => `<table><tr>${head.map((h) => `<th>${h}</th>`).join("")}</tr>${rows.join("")}</table>`;
const num = (v) => `<td class="num">${v === null || v === undefined ? "–" : esc(v)}</td>`;

// A sparkline of [time, value] points (an inline SVG, no library): x runs from the first point
// kept (at most `span` ms back) to now, y from the lowest value to the highest.
function spark(points, span, w = 90, h = 18) {
  if (!points || points.length < 2) return `<svg class="spark" width="${w}" height="${h}"></svg>`;
  const now = points[points.length - 1][0];
  const width = Math.min(span, Math.max(10000, now - points[0][0]));
  const values = points.map((p) => p[1]);
  const lo = Math.min(...values), hi = Math.max(...values), range = hi - lo || 1;
  const xy = points.map(([t, v]) => `${Math.max(0, w - (now - t) / width * w).toFixed(1)},${(h - 1 - (v - lo) / range * (h - 2)).toFixed(1)}`);
  return `<svg class="spark" width="${w}" height="${h}"><title>${lo} … ${hi} over ${Math.round(width / 1000)} s</title><polyline points="${xy.join(" ")}"/></svg>`;
}

// One partition's replicas as bars: each replica's log from log start to log end, the high
// watermark (black) and the last stable offset (orange) as marks on the same scale.
function replicaBars(p) {
  const replicas = p.replica_offsets || [];
  const lo = Math.min(p.log_start_offset, ...replicas.map((r) => r.log_start_offset));
  const hw = p.high_watermark ?? null;  // null: a cluster partition without a leader has none
  const hi = Math.max(hw ?? lo, ...replicas.map((r) => r.log_end_offset), lo + 1);
  const at = (o) => ((o - lo) / (hi - lo) * 100).toFixed(1);
  const lso = p.last_stable_offset !== undefined && p.last_stable_offset < p.high_watermark
    ? `<div class="lso" style="left:${at(p.last_stable_offset)}%" title="LSO ${p.last_stable_offset}"></div>` : "";
  return `<div class="bars">${replicas.map((r) => `<div class="bar" title="broker ${r.broker}: ${r.log_start_offset}..${r.log_end_offset}">
    <div class="fill" style="left:${at(r.log_start_offset)}%;width:${(at(r.log_end_offset) - at(r.log_start_offset)).toFixed(1)}%"></div>
    ${hw === null ? "" : `<div class="hw" style="left:${at(hw)}%" title="high watermark ${hw}"></div>`}${lso}
    <span class="label">${r.broker}: ${r.log_end_offset}</span></div>`).join("")}</div>`;
}

function renderPartitions(partitions, history, span) {
  if (!partitions.length) return `<p class="empty">no partitions yet</p>`;
  return table(["partition", "leader", "epoch", "replicas", "ISR", "log start", "HW", "LSO", "log end",
    "segments", "bytes", "replicas: log end vs HW", "HW, last minutes"],
  partitions.map((p) => `<tr data-partition="${esc(p.topic)}-${p.partition}">
    <td>${esc(p.topic)}-${p.partition}</td>${num(p.leader)}${num(p.leader_epoch)}<td>${esc(p.replicas.join(","))}</td>
    <td>${esc(p.isr.join(","))}</td>${num(p.log_start_offset)}${num(p.high_watermark)}${num(p.last_stable_offset)}
    ${num(p.log_end_offset)}${num(p.segments)}${num(p.size_bytes)}<td>${replicaBars(p)}</td>
    <td>${spark(history[`hw:${p.topic}-${p.partition}`], span)}</td></tr>`));
}

// A producer's window: its cached batches (oldest first), up to five, empty slots dashed.
function producerWindow(batches) {
  const slots = batches.map((b) => `<div class="batch" title="timestamp ${b.timestamp}">seq ${b.first_sequence}–${b.last_sequence}<br>@${b.first_offset}–${b.last_offset}</div>`);
  while (slots.length < 5) slots.push(`<div class="batch none">·</div>`);
  return `<div class="window">${slots.join("")}</div>`;
}

function renderProducers(partitions) {
  const rows = [];
  for (const p of partitions) {
    for (const e of p.producers) {
      const open = e.current_txn_first_offset >= 0 ? `<span class="tag open">open from ${e.current_txn_first_offset}</span>` : "";
      rows.push(`<tr data-producer-id="${e.producer_id}" data-partition="${esc(p.topic)}-${p.partition}">
        <td>${esc(p.topic)}-${p.partition}</td>${num(e.producer_id)}${num(e.epoch)}<td>${producerWindow(e.batches)}</td>
        <td>${e.last_timestamp >= 0 ? esc(new Date(e.last_timestamp).toISOString()) : "–"}</td>${num(e.coordinator_epoch)}<td>${open}</td></tr>`);
    }
    if (p.producer_count > p.producers.length) {
      rows.push(`<tr><td colspan="7" class="empty">${esc(p.topic)}-${p.partition}: ${p.producer_count - p.producers.length} less recent producer ids not shown</td></tr>`);
    }
  }
  if (!rows.length) return `<p class="empty">no producers yet</p>`;
  return table(["partition", "producer id", "epoch", "cached batches (sequences @ offsets)", "last timestamp", "coordinator epoch", "transaction"], rows);
}

const TXN_TAGS = {Ongoing: "open", PrepareCommit: "committing", CompleteCommit: "committed", PrepareAbort: "aborting", CompleteAbort: "aborted"};

function renderTransactions(txns, nowMs) {
  if (!txns.length) return `<p class="empty">no transactional ids yet</p>`;
  return table(["transactional id", "producer id", "epoch", "state", "partitions", "age vs timeout"],
    txns.map((t) => {
      const tag = TXN_TAGS[t.state] || "";
      const live = t.state === "Ongoing" || t.state.startsWith("Prepare");
      const age = live && t.start_ms > 0 ? Math.max(0, nowMs - t.start_ms) : null;
      const ageCell = age === null ? "–" : `<span class="age"><span class="fill${age > 0.8 * t.timeout_ms ? " late" : ""}" style="width:${Math.min(100, age / t.timeout_ms * 100).toFixed(1)}%"></span></span> ${(age / 1000).toFixed(1)} s / ${(t.timeout_ms / 1000).toFixed(0)} s`;
      return `<tr data-transactional-id="${esc(t.transactional_id)}" data-state="${esc(t.state)}">
        <td>${esc(t.transactional_id)}</td>${num(t.producer_id)}${num(t.producer_epoch)}
        <td>${esc(t.state)} <span class="tag ${tag}">${tag}</span></td><td>${esc(t.partitions.join(", "))}</td><td>${ageCell}</td></tr>`;
    }));
}

function assignmentText(a) {
  if (a === null) return "(not a consumer assignment)";
  return a.map((t) => `${esc(t.topic)}: ${t.partitions.join(",")}`).join("; ") || "–";
}

function renderGroups(groups, history, span) {
  if (!groups.length) return `<p class="empty">no groups yet</p>`;
  return groups.map((g) => `<div data-group="${esc(g.group_id)}"><h3>${esc(g.group_id)} <small>${esc(g.state)}, ${esc(g.protocol_type || "no protocol type")}/${esc(g.protocol || "–")}, generation ${g.generation}, lag ${g.lag} ${spark(history[`lag:${g.group_id}`], span)}</small></h3>
    ${g.members.length ? table(["member", "client", "host", "assignment"], g.members.map((m) => `<tr><td>${esc(m.member_id)}${m.member_id === g.leader ? " (leader)" : ""}</td>
      <td>${esc(m.client_id)}</td><td>${esc(m.client_host)}</td><td>${assignmentText(m.assignment)}</td></tr>`)) : `<p class="empty">no members</p>`}
    ${g.offsets.length ? table(["partition", "committed", "high watermark", "lag", "lag, last minutes"], g.offsets.map((o) => `<tr data-offset="${esc(o.topic)}-${o.partition}">
      <td>${esc(o.topic)}-${o.partition}</td>${num(o.committed)}${num(o.high_watermark)}${num(o.lag)}
      <td>${spark(history[`lag:${g.group_id}:${o.topic}-${o.partition}`], span)}</td></tr>`)) : ""}</div>`).join("");
}

// a cluster's rule: the brokers it is in force on, and whose requests it takes (follower fetches)
function brokersText(r) {
  const on = r.broker && r.broker.length ? ` on broker ${r.broker.join(",")}` : "";
  const from = r.from_broker === true ? " from brokers" : r.from_broker === false ? " from clients"
    : r.from_broker ? ` from broker ${r.from_broker.join(",")}` : "";
  return on + from;
}

function renderFaults(rules, history, span) {
  if (!rules.length) return `<p class="empty">no rules</p>`;
  return table(["id", "action", "api", "topic", "partition", "trigger", "details", "matched", "fired", "fired, last minutes", ""],
    rules.map((r) => `<tr data-rule-id="${esc(r.id)}"${r.spent ? ' class="empty"' : ""}>
      <td>${esc(r.id)}</td><td>${esc(r.action)}</td><td>${esc(r.api || "any")}</td><td>${esc(r.topic || "any")}</td>
      <td>${r.partition ?? "any"}</td><td>${esc(r.trigger)}${["next", "every", "nth"].includes(r.trigger) ? ":" + r.n : ""}${r.spent ? " (spent)" : ""}</td>
      <td>${esc(r.error_name || r.mode || (r.delay_ms !== undefined ? r.delay_ms + " ms" : ""))}${esc(brokersText(r))}</td>
      ${num(r.matched)}<td class="num fired">${r.fired}</td><td>${spark(history[`fired:${r.id}`], span)}</td>
      <td><button type="button" data-delete="/faults/${encodeURIComponent(r.id)}">remove</button></td></tr>`));
}

// A broker's buttons: the HTTP routes of the cluster's admin endpoint for what it can do now.
function brokerButtons(b) {
  const post = (action, label, body) => `<button type="button" data-post="/brokers/${b.id}/${action}"${body ? ` data-body='${body}'` : ""}>${label}</button>`;
  if (b.state === "fenced") return post("start", "start");
  return [post("crash", "crash"), post("restart", "restart", '{"clean": true}'), post("shutdown", "shut down"),
    b.isolated === "none" ? post("isolate", "isolate", '{"from": "all"}') : post("heal", "heal")].join(" ");
}

// The cluster's replicas as bars: a replica whose broker is down has no log to read (a grey "down").
function clusterBars(p) {
  const up = p.replica_offsets || [];
  if (!up.length) return `<span class="bad">no replica up</span>`;
  const bars = replicaBars({...p, log_start_offset: Math.min(...up.map((r) => r.log_start_offset))});
  const down = p.replicas.filter((id) => !up.some((r) => r.broker === id));
  return `<div class="bars">${bars}${down.map((id) => `<div class="bar down" title="broker ${id} is down"><span class="label">${id}: down</span></div>`).join("")}</div>`;
}

function clusterPartitionRows(partitions) {
  return partitions.map((p) => `<tr data-cluster-partition="${esc(p.topic)}-${p.partition}">
    <td>${esc(p.topic)}-${p.partition}</td><td class="num leader">${p.leader < 0 ? "none" : p.leader}</td>${num(p.leader_epoch)}
    <td>${p.replicas.join(",")}</td><td class="isr">${p.isr.join(",")}</td><td class="bad">${(p.offline || []).join(",")}</td><td class="num hw">${p.high_watermark ?? "–"}</td>
    <td>${clusterBars(p)}</td>
    <td>${p.replicas.filter((r) => r !== p.leader).map((r) => `<button type="button" data-post="/topics/${encodeURIComponent(p.topic)}/${p.partition}/leader" data-body='{"broker": ${r}}'>${r}</button>`).join(" ")}</td></tr>`);
}

function renderCluster(c) {
  const brokers = table(["broker", "address", "rack", "state", "isolated from", ""], c.brokers.map((b) => `<tr data-broker="${b.id}" data-state="${esc(b.state)}">
    <td>${b.id}${b.id === c.controller ? " (controller)" : ""}</td><td>${esc(b.host)}:${b.port}</td><td>${esc(b.rack ?? "–")}</td>
    <td class="${b.state === "active" ? "ok" : "bad"} state">${b.state === "fenced" ? "down (fenced)" : esc(b.state)}</td>
    <td class="${b.isolated === "none" && !b.slowed_ms ? "" : "bad"}">${esc(b.isolated)}${b.slowed_ms ? `, fetches ${b.slowed_ms} ms late` : ""}</td><td>${brokerButtons(b)}</td></tr>`));
  const head = ["partition", "leader", "epoch", "replicas", "ISR", "offline", "HW", "replicas: log end vs HW", "move leader to"];
  // Kafka's internal topics (the coordinators' __consumer_offsets has 50 partitions) folded away
  const internal = c.partitions.filter((p) => p.topic.startsWith("__"));
  const user = c.partitions.filter((p) => !p.topic.startsWith("__"));
  const parts = user.length ? table(head, clusterPartitionRows(user)) : `<p class="empty">no partitions yet</p>`;
  const folded = internal.length ? `<details><summary>${internal.length} partitions of internal topics</summary>${table(head, clusterPartitionRows(internal))}</details>` : "";
  return brokers + parts + folded;
}
