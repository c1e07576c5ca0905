// The status page: polls the admin API's JSON (the same Snapshot as /metrics) and draws it.
// Every value from the daemon goes into the page as text (textContent, SVG attributes set
// one by one): host names and URLs come from crawled pages and submitted lists, and none of
// them may become markup. The Content-Security-Policy allows this file and the API only.
"use strict";

const STATS_EVERY_MS = 2000;
const HOSTS_EVERY_MS = 5000;
const HISTORY = 150; // points kept: five minutes at one poll every two seconds

const history = []; // {t, pages, bytes}: monotonic time (ms) and the counters then
let updates = 0;

function el(id) {
  return document.getElementById(id);
}

function human(n) {
  if (n === null || n === undefined) return "-";
  const units = ["", "k", "M", "G", "T"];
  let i = 0;
  let v = Number(n);
  while (Math.abs(v) >= 1000 && i < units.length - 1) {
    v /= 1000;
    i += 1;
  }
  return (i === 0 ? String(Math.round(v)) : v.toFixed(1)) + units[i];
}

function bytes(n) {
  if (n === null || n === undefined) return "-";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  let v = Number(n);
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return (i === 0 ? String(v) : v.toFixed(1)) + " " + units[i];
}

function duration(s) {
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  return (h > 0 ? h + " h " : "") + m + " min " + (s % 60) + " s";
}

// A value shown as text, with the exact number kept in data-value for readers and tests.
function setStat(id, value, shown) {
  const node = el(id);
  if (!node) return;
  node.textContent = shown;
  node.dataset.value = String(value);
}

function cell(text, numeric) {
  const td = document.createElement("td");
  td.textContent = text === null || text === undefined ? "-" : String(text);
  if (numeric) td.className = "num";
  return td;
}

// Replace a table's body with rows of cells ([text, numeric] pairs).
function fillTable(id, rows) {
  const body = el(id).tBodies[0];
  const fresh = document.createElement("tbody");
  for (const row of rows) {
    const tr = document.createElement("tr");
    for (const [text, numeric] of row) tr.appendChild(cell(text, numeric));
    fresh.appendChild(tr);
  }
  body.replaceWith(fresh);
}

function pairs(id, object) {
  fillTable(
    id,
    Object.entries(object || {}).map(([k, v]) => [[k, false], [human(v), true]]),
  );
}

function drawChart(id, values) {
  const svg = el(id);
  const line = svg.querySelector("polyline");
  const max = Math.max(1, ...values);
  const step = values.length > 1 ? 300 / (values.length - 1) : 300;
  const points = values.map((v, i) => (i * step).toFixed(1) + "," + (58 - (v / max) * 56).toFixed(1));
  line.setAttribute("points", points.join(" "));
  svg.dataset.points = String(values.length);
  svg.dataset.last = String(values.length ? values[values.length - 1] : 0);
}

function rates() {
  const pages = [];
  const bytesPerS = [];
  for (let i = 1; i < history.length; i++) {
    const dt = (history[i].t - history[i - 1].t) / 1000;
    if (dt <= 0) continue;
    pages.push(Math.max(0, (history[i].pages - history[i - 1].pages) / dt));
    bytesPerS.push(Math.max(0, (history[i].bytes - history[i - 1].bytes) / dt));
  }
  return [pages, bytesPerS];
}

function renderStats(s) {
  setStat("stat-pages_fetched", s.pages_fetched, human(s.pages_fetched));
  setStat("stat-queued", s.queued, human(s.queued));
  setStat("stat-in_flight", s.in_flight, human(s.in_flight));
  setStat("stat-hosts_in_backoff", s.hosts_in_backoff, human(s.hosts_in_backoff));
  setStat("stat-hosts_paused", s.hosts_paused, human(s.hosts_paused));
  setStat("stat-warc_bytes", s.warc_bytes, bytes(s.warc_bytes));
  setStat("stat-store_bytes", s.store_bytes, bytes(s.store_bytes));
  setStat("stat-uptime_s", s.uptime_s, duration(s.uptime_s));
  el("state").textContent = s.stopping ? "stopping" : "running";

  history.push({ t: performance.now(), pages: s.pages_fetched, bytes: s.bytes_fetched });
  while (history.length > HISTORY) history.shift();
  const [pages, bytesPerS] = rates();
  drawChart("chart-pages", pages);
  drawChart("chart-bytes", bytesPerS);
  el("rate-pages").textContent = pages.length ? human(pages[pages.length - 1]) : "-";
  el("rate-bytes").textContent = bytesPerS.length ? bytes(Math.round(bytesPerS[bytesPerS.length - 1])) : "-";

  const q = s.queued_by_reason;
  if (q) {
    const rows = [["eligible", q.eligible], ["politeness", q.politeness], ["paused", q.paused]];
    for (const [state, n] of Object.entries(q.robots || {})) rows.push(["robots.txt " + state, n]);
    fillTable("queued-by-reason", rows.map(([k, v]) => [[k, false], [human(v), true]]));
  }
  pairs("robots-states", s.robots_states);
  pairs("fetch-classes", s.fetch_classes);
  pairs("revisits", s.revisits);
  if (s.cluster) {
    el("cluster-box").hidden = false;
    pairs("cluster", s.cluster);
  }
  updates += 1;
  document.body.dataset.updates = String(updates);
}

function renderHosts(busiestAnswer, slowestAnswer) {
  fillTable(
    "busiest",
    (busiestAnswer.hosts || []).map((h) => [[h.host, false], [human(h.counters.completed), true], [human(h.queued), true]]),
  );
  fillTable(
    "slowest",
    (slowestAnswer.hosts || []).map((h) => [[h.host, false], [h.last_response_ms + " ms", true], [human(h.queued), true]]),
  );
}

function renderRecent(answer) {
  fillTable(
    "recent",
    (answer.fetches || []).map((f) => [
      [f.at.replace("T", " ").replace("Z", ""), false],
      [f.status, true],
      [f.outcome, false],
      [f.url, false],
      [f.reason, false],
    ]),
  );
}

async function getJson(path) {
  const r = await fetch(path, { cache: "no-store", credentials: "same-origin" });
  if (!r.ok) throw new Error(path + ": HTTP " + r.status);
  return r.json();
}

async function pollStats() {
  try {
    renderStats(await getJson("/v1/stats"));
    renderRecent(await getJson("/v1/recent"));
  } catch (e) {
    el("state").textContent = "no answer: " + e.message;
  }
  setTimeout(pollStats, STATS_EVERY_MS);
}

async function pollHosts() {
  try {
    // ranked by the daemon among the hosts with work, however many there are
    const busiest = await getJson("/v1/hosts?sort=completed&limit=10");
    const slowest = await getJson("/v1/hosts?sort=slowest&limit=10");
    renderHosts(busiest, slowest);
  } catch (e) {
    el("state").textContent = "no answer: " + e.message;
  }
  setTimeout(pollHosts, HOSTS_EVERY_MS);
}

pollStats();
pollHosts();
