// rein dashboard: follows the server through the event stream `rein dashboard` serves (one `/status`
// reading, and the Prometheus metrics when the server has them, per interval) and draws the last minutes.
"use strict";

const KEEP = 300; // readings kept for the charts (five minutes at one a second)
const readings = [];
let generation = null;
let shownLog = null;

const $ = (sel) => document.querySelector(sel);
const text = (v) => (v === undefined || v === null ? "" : String(v));
const esc = (v) => text(v).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
const num = (n) => (n === null || n === undefined || Number.isNaN(n) ? "–" : Math.round(n).toLocaleString("en"));

function bytes(n) {
  if (n === undefined || n === null) return "";
  return n < 1048576 ? `${Math.round(n / 1024)} KiB` : `${(n / 1048576).toFixed(1)} MiB`;
}

function duration(s) {
  if (s === undefined || s === null) return "";
  s = Math.floor(s);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
  return `${Math.floor(s / 86400)}d${String(Math.floor((s % 86400) / 3600)).padStart(2, "0")}h`;
}

// ----- Prometheus text: request classes and the latency histogram, summed over every label set ----------

function parseMetrics(body) {
  // classes: requests by status class over every listener; byListener and byTarget: by name, then class.
  const out = { classes: {}, buckets: new Map(), byListener: {}, byTarget: {} };
  if (!body) return out;
  for (const line of body.split("\n")) {
    if (!line || line[0] === "#") continue;
    const m = line.match(/^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/);
    if (!m) continue;
    const [, name, labelText, valueText] = m;
    const value = Number(valueText);
    const labels = {};
    for (const l of (labelText || "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
    if (name === "rein_http_requests_total" && labels.code) {
      out.classes[labels.code] = (out.classes[labels.code] || 0) + value;
      const l = (out.byListener[labels.listener] ||= {});
      l[labels.code] = value;
    } else if (name === "rein_target_requests_total" && labels.code) {
      const t = (out.byTarget[labels.target] ||= {});
      t[labels.code] = value;
    } else if (/^rein_http_request_duration_seconds_bucket$/.test(name)) {
      const le = labels.le === "+Inf" ? Infinity : Number(labels.le);
      out.buckets.set(le, (out.buckets.get(le) || 0) + value);
    }
  }
  return out;
}

// The q-quantile of the requests between two readings, interpolated within its bucket as Prometheus does.
function quantile(q, before, now) {
  const les = [...now.buckets.keys()].sort((a, b) => a - b);
  if (!les.length) return null;
  const delta = les.map((le) => (now.buckets.get(le) || 0) - (before.buckets.get(le) || 0));
  const total = delta[delta.length - 1];
  if (!(total > 0)) return null;
  const rank = q * total;
  for (let i = 0; i < les.length; i++) {
    if (delta[i] >= rank) {
      if (les[i] === Infinity) return les[i - 1] ?? null;
      const lower = i ? les[i - 1] : 0;
      const below = i ? delta[i - 1] : 0;
      const inBucket = delta[i] - below;
      return lower + (les[i] - lower) * (inBucket > 0 ? (rank - below) / inBucket : 1);
    }
  }
  return null;
}

// ----- one reading ---------------------------------------------------------------------------------------

function onReading(event) {
  const data = JSON.parse(event.data);
  const reading = { at: data.at, status: data.status, metrics: parseMetrics(data.metrics) };
  const before = readings[readings.length - 1];
  if (before) {
    const secs = (reading.at - before.at) / 1000;
    const total = (r) => (r.status.requests && r.status.requests.total) || 0;
    reading.rps = secs > 0 ? Math.max(0, total(reading) - total(before)) / secs : null;
    const cls = (r, c) => r.metrics.classes[c] || 0;
    reading.e4 = secs > 0 ? Math.max(0, cls(reading, "4xx") - cls(before, "4xx")) / secs : null;
    reading.e5 = secs > 0 ? Math.max(0, cls(reading, "5xx") - cls(before, "5xx")) / secs : null;
    const p50 = quantile(0.5, before.metrics, reading.metrics);
    const p99 = quantile(0.99, before.metrics, reading.metrics);
    reading.p50 = p50 === null ? null : p50 * 1000;
    reading.p99 = p99 === null ? null : p99 * 1000;
  }
  readings.push(reading);
  if (readings.length > KEEP) readings.shift();
  live(true);
  render(reading);
}

function live(up, why) {
  const badge = $("#conn");
  badge.textContent = up ? "live" : `down${why ? ": " + why : ""}`;
  badge.className = `badge ${up ? "live" : "down"}`;
}

function render(r) {
  const s = r.status;
  $("#rps").textContent = r.rps === undefined ? "–" : num(r.rps);
  $("#requests").textContent = num(s.requests && s.requests.total);
  $("#conns").textContent = s.connections ? `${num(s.connections.active)} / ${num(s.connections.idle)}` : "–";
  const hasClasses = Object.keys(r.metrics.classes).length > 0;
  $("#errors").textContent = hasClasses && r.e4 !== undefined ? `${num(r.e4)} / ${num(r.e5)}` : "–";
  const gen = s.config && s.config.generation;
  $("#generation").textContent = text(gen);
  if (gen !== generation) {
    generation = gen;
    loadHistory();
  }
  renderApps(s.applications || {});
  renderListeners(s.listeners || {});
  renderTargets();
  renderUpstreams(s.upstreams || {});
  renderExits(s.applications || {});
  renderReloads(s.applications || {});
  chart("#chart-rps", [{ key: "rps", color: "#2456c7" }]);
  chart("#chart-latency", [{ key: "p50", color: "#2456c7" }, { key: "p99", color: "#c62828" }]);
  chart("#chart-errors", [{ key: "e4", color: "#2456c7" }, { key: "e5", color: "#c62828" }]);
}

function instanceRate(name, inst) {
  const before = readings[readings.length - 2];
  const now = readings[readings.length - 1];
  if (!before) return "";
  const app = (before.status.applications || {})[name];
  const old = app && (app.instances || []).find((i) => i.id === inst.id);
  if (!old || inst.requests === undefined) return "";
  const secs = (now.at - before.at) / 1000;
  return secs > 0 ? num(Math.max(0, inst.requests - old.requests) / secs) : "";
}

// Applications are updated in place, keyed by name and instance id: their buttons stay the same elements from
// one reading to the next, so a click that straddles a reading is not lost.
function renderApps(apps) {
  const box = $("#apps");
  const names = Object.keys(apps);
  box.querySelector("p.empty")?.remove();
  for (const el of [...box.querySelectorAll(".app")]) {
    if (!(el.dataset.app in apps)) el.remove();
  }
  if (!names.length) {
    box.innerHTML = '<p class="empty">No application.</p>';
    return;
  }
  for (const name of names) {
    const a = apps[name];
    const el = [...box.querySelectorAll(".app")].find((e) => e.dataset.app === name) || box.appendChild(appElement(name));
    const state = a.errored ? "errored" : a.state || "starting";
    const stateEl = el.querySelector('[data-role="state"]');
    stateEl.className = `state-${state}`;
    stateEl.textContent = state + (a.errored ? ": " + a.errored : "");
    el.querySelector('[data-role="generation"]').textContent = text(a.generation);
    el.querySelector('[data-role="queued"]').textContent = text(a.queued);
    renderInstances(el.querySelector("tbody"), name, a.instances || []);
  }
}

function appElement(name) {
  const el = document.createElement("div");
  el.className = "app";
  el.dataset.app = name;
  el.innerHTML = `
    <div class="head">
      <span class="name">${esc(name)}</span>
      <span data-role="state"></span>
      <span class="meta">generation <b data-role="generation"></b></span>
      <span class="meta">queued <span data-role="queued"></span></span>
      <span style="margin-left:auto"></span>
      <button data-action="reload" data-app="${esc(name)}">Reload</button>
      <button data-action="log" data-app="${esc(name)}">Log</button>
    </div>
    <table><thead><tr><th>instance</th><th>pid</th><th>state</th><th>uptime</th><th>restarts</th><th>memory</th><th>req/s</th><th>requests</th><th>in flight</th><th></th></tr></thead>
    <tbody></tbody></table>`;
  return el;
}

function renderInstances(tbody, name, instances) {
  const ids = new Set(instances.map((i) => String(i.id)));
  for (const row of [...tbody.rows]) {
    if (!ids.has(row.dataset.id)) row.remove();
  }
  for (const i of instances) {
    let row = [...tbody.rows].find((r) => r.dataset.id === String(i.id));
    if (!row) {
      row = tbody.insertRow();
      row.dataset.id = String(i.id);
      for (let c = 0; c < 9; c++) row.insertCell();
      row.insertCell().innerHTML = `<button data-action="restart" data-app="${esc(name)}" data-id="${esc(i.id)}">Restart</button>`;
    }
    row.dataset.pid = text(i.pid);
    const cells = [i.id, i.pid, i.state, duration(i.uptime), i.restarts, bytes(i.rss_bytes), instanceRate(name, i),
      num(i.requests), i.in_flight];
    cells.forEach((v, c) => { row.cells[c].textContent = text(v); });
    row.cells[2].className = `state-${i.state}`;
  }
}

// Requests per second of one name in `byListener` or `byTarget`, between the last two readings.
function countRate(kind, name) {
  const before = readings[readings.length - 2];
  const now = readings[readings.length - 1];
  if (!before || !now) return "";
  const sum = (r) => Object.values((r.metrics[kind] || {})[name] || {}).reduce((a, b) => a + b, 0);
  const secs = (now.at - before.at) / 1000;
  return secs > 0 ? num(Math.max(0, sum(now) - sum(before)) / secs) : "";
}

function classCells(counts) {
  return ["2xx", "3xx", "4xx", "5xx"].map((c) => `<td>${num(counts[c] || 0)}</td>`).join("");
}

function renderListeners(listeners) {
  const by = readings[readings.length - 1].metrics.byListener;
  $("#listeners tbody").innerHTML = Object.entries(listeners)
    .map(([name, l]) => `<tr><td>${esc(name)}</td><td>${esc(l.address)}</td><td>${countRate("byListener", name)}</td>
      ${classCells(by[name] || {})}</tr>`).join("");
}

function renderTargets() {
  const by = readings[readings.length - 1].metrics.byTarget;
  const rows = Object.keys(by).sort().map((name) => `<tr data-target="${esc(name)}"><td>${esc(name)}</td>
    <td>${countRate("byTarget", name)}</td>${classCells(by[name])}</tr>`);
  $("#targets tbody").innerHTML = rows.join("") || '<tr><td colspan="6" class="empty">none yet</td></tr>';
}

function renderUpstreams(upstreams) {
  const rows = [];
  for (const [name, u] of Object.entries(upstreams)) {
    for (const [addr, s] of Object.entries(u.servers || {})) {
      rows.push(`<tr><td>${esc(name)}</td><td>${esc(addr)}</td><td class="state-${esc(s.state)}">${esc(s.state)}</td>
        <td>${esc(s.active)}</td><td>${num(s.requests)}</td><td>${esc(s.failures)}</td></tr>`);
    }
  }
  $("#upstreams tbody").innerHTML = rows.join("") || '<tr><td colspan="6" class="empty">none</td></tr>';
}

function renderExits(apps) {
  const rows = [];
  for (const [name, a] of Object.entries(apps)) {
    for (const e of a.exited || []) {
      rows.push({ secs: e.seconds_ago, html: `<tr><td>${esc(name)}</td><td>${esc(e.id)}</td><td>${esc(e.pid)}</td>
        <td class="state-${esc(e.state)}">${esc(e.state)}${e.reason ? ": " + esc(e.reason) : ""}</td><td>${duration(e.seconds_ago)} ago</td></tr>` });
    }
  }
  rows.sort((a, b) => a.secs - b.secs);
  $("#exited tbody").innerHTML = rows.map((r) => r.html).join("") || '<tr><td colspan="5" class="empty">none</td></tr>';
}

function renderReloads(apps) {
  const rows = Object.entries(apps).filter(([, a]) => a.last_reload).map(([name, a]) => {
    const r = a.last_reload;
    const outcome = r.ok ? "ok" : `failed${r.reason ? ": " + esc(r.reason) : ""}`;
    const counts = r.requests_served === undefined ? "" : `${num(r.requests_served)} / ${num(r.requests_failed)}`;
    return `<tr><td>${esc(name)}</td><td>${esc(r.generation)}</td><td class="${r.ok ? "state-running" : "state-errored"}">${outcome}</td>
      <td>${r.seconds === undefined ? "" : r.seconds.toFixed(2) + " s"}</td><td>${counts}</td></tr>`;
  });
  $("#reloads tbody").innerHTML = rows.join("") || '<tr><td colspan="5" class="empty">none yet</td></tr>';
}

// ----- configuration history ---------------------------------------------------------------------------

async function loadHistory() {
  try {
    const r = await fetch("/api/history");
    if (!r.ok) return;
    const doc = await r.json();
    const entries = Array.isArray(doc) ? doc : [];
    $("#history-section").hidden = false;
    // Newest first, as the API lists them; the running document has no button.
    $("#history tbody").innerHTML = entries.map((e) => `
      <tr data-entry="${esc(e.id)}"><td>${esc(e.id)}</td><td>${esc(e.time)}</td><td>${esc(e.source)}</td><td><code>${esc(e.etag)}</code></td>
      <td>${e.current ? "running" : `<button data-action="rollback" data-id="${esc(e.id)}">Roll back to this</button>`}</td></tr>`).join("");
  } catch (_) { /* the history is optional */ }
}

// ----- actions -----------------------------------------------------------------------------------------

async function act(url, what) {
  say(`${what}…`);
  try {
    const r = await fetch(url, { method: "POST" });
    const doc = await r.json().catch(() => ({}));
    say(r.ok ? `${what}: done` : `${what}: ${doc.error || r.status}${doc.detail ? " " + doc.detail : ""}`);
  } catch (e) {
    say(`${what}: ${e}`);
  }
}

function say(message) {
  $("#message").textContent = message;
}

async function showLog(name) {
  shownLog = name;
  $("#log-section").hidden = false;
  $("#log-title").textContent = `Log: ${name}`;
  await refreshLog();
}

async function refreshLog() {
  if (!shownLog) return;
  try {
    const r = await fetch(`/api/logs/${encodeURIComponent(shownLog)}`);
    const doc = await r.json();
    const pre = $("#log");
    const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    pre.textContent = (doc.lines || []).slice(-200).join("\n");
    if (atEnd) pre.scrollTop = pre.scrollHeight;
  } catch (_) { /* shown again at the next refresh */ }
}

document.addEventListener("click", (e) => {
  const b = e.target.closest("button[data-action]");
  if (!b) return;
  const app = b.dataset.app;
  if (b.dataset.action === "reload") act(`/api/reload/${encodeURIComponent(app)}`, `reload of ${app}`);
  if (b.dataset.action === "log") showLog(app);
  if (b.dataset.action === "restart") {
    act(`/api/restart/${encodeURIComponent(app)}/${encodeURIComponent(b.dataset.id)}`, `restart of ${app} instance ${b.dataset.id}`);
  }
  if (b.dataset.action === "rollback") act(`/api/rollback/${encodeURIComponent(b.dataset.id)}`, `rollback to ${b.dataset.id}`);
});

// ----- charts ------------------------------------------------------------------------------------------

function chart(selector, series) {
  const canvas = $(selector);
  const ratio = window.devicePixelRatio || 1;
  const w = canvas.clientWidth || canvas.width;
  const h = canvas.clientHeight || canvas.height;
  if (canvas.width !== w * ratio) { canvas.width = w * ratio; canvas.height = h * ratio; }
  const g = canvas.getContext("2d");
  g.setTransform(ratio, 0, 0, ratio, 0, 0);
  g.clearRect(0, 0, w, h);
  const values = series.flatMap((s) => readings.map((r) => r[s.key]).filter((v) => v !== null && v !== undefined));
  const max = Math.max(1, ...values) * 1.1;
  const left = 44, bottom = h - 18, top = 6, right = w - 6;
  g.strokeStyle = "#dde1e6"; g.fillStyle = "#66707c"; g.font = "11px system-ui, sans-serif";
  for (let i = 0; i <= 2; i++) {
    const y = bottom - ((bottom - top) * i) / 2;
    g.beginPath(); g.moveTo(left, y); g.lineTo(right, y); g.stroke();
    g.fillText(formatAxis((max * i) / 2), 2, y + 4);
  }
  g.fillText(`${Math.round((readings.length ? readings[readings.length - 1].at - readings[0].at : 0) / 1000)} s`, left, h - 4);
  g.fillText("now", right - 22, h - 4);
  const x = (i) => left + ((right - left) * (KEEP - readings.length + i)) / (KEEP - 1);
  for (const s of series) {
    g.strokeStyle = s.color; g.lineWidth = 1.6; g.beginPath();
    let drawing = false;
    readings.forEach((r, i) => {
      const v = r[s.key];
      if (v === null || v === undefined) { drawing = false; return; }
      const y = bottom - ((bottom - top) * v) / max;
      if (drawing) g.lineTo(x(i), y); else g.moveTo(x(i), y);
      drawing = true;
    });
    g.stroke();
  }
}

function formatAxis(v) {
  return v >= 1000 ? `${(v / 1000).toFixed(1)}k` : v >= 10 ? String(Math.round(v)) : v.toFixed(1);
}

// ----- start -------------------------------------------------------------------------------------------

const stream = new EventSource("/events");
stream.onmessage = onReading;
stream.addEventListener("error", (e) => {
  let why = "";
  try { why = JSON.parse(e.data).error; } catch (_) { /* a dropped stream carries no data */ }
  live(false, why);
});
setInterval(refreshLog, 2000);
