// The live dashboard: polls api/samples (every address space's metrics, as JSON samples),
// turns counters into rates between two polls, and draws the application's graph, its
// watermarks over time, its containers, tasks and executors. Read-only.
"use strict";

const POLL_MS = 1000;
// Points kept per chart: five minutes at one poll a second.
const HISTORY = 300;
const PALETTE = ["#4c78a8", "#f58518", "#54a24b", "#b279a2", "#e45756", "#72b7b2", "#9d755d", "#eeca3b"];

const state = {
  prev: null, // {t, values: Map(key -> value)}
  zones: new Map(), // "space zone" -> {t, watermark, floor, plot, holder}
  executors: new Map(), // executor -> {t, workers: Map(worker -> [jobs/s]), plot, workersKey}
  refreshes: 0,
  spaceColor: new Map(),
};

const label = (s, k) => {
  for (const [name, v] of s.labels) if (name === k) return v;
  return "";
};
const value = (s) => (typeof s.value === "number" ? s.value : s.value === "inf" ? Infinity : s.value === "-inf" ? -Infinity : NaN);
const key = (s) => s.name + "{" + s.labels.map(([k, v]) => k + "=" + v).join(",") + "}";
const spaceOf = (s) => label(s, "space") || "local";
const short = (space) => (space.length > 8 ? space.slice(0, 8) : space);
// Timestamps at the ends of their range (INFINITY, the lowest) stand for "none yet" or
// "no bound": shown as infinities, left out of charts.
const EDGE = 1e18;
const fmtTs = (v) => (v >= EDGE ? "∞" : v <= -EDGE ? "−∞" : Number.isFinite(v) ? String(Math.round(v)) : "–");
const fmtRate = (v) => (v === undefined ? "–" : v >= 100 ? v.toFixed(0) : v.toFixed(1));
const esc = (t) => String(t).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);

function color(space) {
  if (!state.spaceColor.has(space)) state.spaceColor.set(space, PALETTE[state.spaceColor.size % PALETTE.length]);
  return state.spaceColor.get(space);
}

// The rate of the counter `s` since the last poll, if it was seen then.
function rate(s, now) {
  if (!state.prev) return undefined;
  const before = state.prev.values.get(key(s));
  const dt = now - state.prev.t;
  if (before === undefined || dt <= 0) return undefined;
  return Math.max(0, value(s) - before) / dt;
}

function byName(samples) {
  const m = new Map();
  for (const s of samples) {
    if (!m.has(s.name)) m.set(s.name, []);
    m.get(s.name).push(s);
  }
  return m;
}

function fillTable(id, rows) {
  const body = document.querySelector("#" + id + " tbody");
  body.innerHTML = rows.map((r) => "<tr>" + r.map((c) => "<td>" + c + "</td>").join("") + "</tr>").join("");
}

function spaces(f, now) {
  const rows = [];
  for (const up of f.get("stampede_space_up") || []) {
    const space = spaceOf(up);
    const one = (name) => (f.get(name) || []).find((s) => spaceOf(s) === space);
    const rss = one("stampede_process_resident_bytes");
    const served = one("stampede_space_served");
    const pushed = one("stampede_space_pushed");
    const unreachable = one("stampede_space_unreachable");
    rows.push([
      `<span style="color:${color(space)}">■</span> ${esc(short(space))}`,
      value(up) > 0 ? "up" : '<span class="down">no answer</span>',
      served ? fmtRate(rate(served, now)) : "–",
      pushed ? fmtRate(rate(pushed, now)) : "–",
      unreachable ? `<span class="${value(unreachable) > 0 ? "warn" : ""}">${value(unreachable)}</span>` : "–",
      rss ? (value(rss) / 1048576).toFixed(0) : "–",
    ]);
  }
  if (rows.length === 0) {
    // One runtime, no distribution: the process itself.
    const rss = (f.get("stampede_process_resident_bytes") || [])[0];
    rows.push(["local", "up", "–", "–", "–", rss ? (value(rss) / 1048576).toFixed(0) : "–"]);
  }
  fillTable("spaces", rows);
}

// The graph: tasks and containers as nodes, connections as edges with their rates.
function graph(f, now) {
  const nodes = new Map();
  const edges = [];
  const node = (id, kind, name, space, sub) => {
    if (!nodes.has(id)) nodes.set(id, { id, kind, name, space, sub: "", rank: 0 });
    const n = nodes.get(id);
    if (sub) n.sub = sub;
    return n;
  };
  for (const s of f.get("stampede_container_items") || []) {
    node("c:" + label(s, "container"), label(s, "kind"), label(s, "container"), spaceOf(s), "items " + value(s));
  }
  for (const s of f.get("stampede_task_virtual_time") || []) {
    node("t:" + spaceOf(s) + ":" + label(s, "task"), "task", label(s, "task"), spaceOf(s), "vt " + fmtTs(value(s)));
  }
  for (const s of f.get("stampede_connection_operations") || []) {
    const t = node("t:" + spaceOf(s) + ":" + label(s, "task"), "task", label(s, "task"), spaceOf(s));
    const c = node("c:" + label(s, "container"), label(s, "kind"), label(s, "container"), label(s, "owner") || spaceOf(s));
    const r = rate(s, now);
    edges.push(label(s, "direction") === "output" ? { from: t, to: c, rate: r } : { from: c, to: t, rate: r });
  }
  // Layers: a node sits one column right of everything feeding it (cycles stop after a
  // bounded number of rounds).
  for (let round = 0; round < nodes.size; round++) {
    let moved = false;
    for (const e of edges) {
      if (e.to.rank < e.from.rank + 1 && e.from !== e.to) {
        e.to.rank = e.from.rank + 1;
        moved = true;
      }
    }
    if (!moved) break;
  }
  const columns = [];
  for (const n of nodes.values()) (columns[n.rank] = columns[n.rank] || []).push(n);
  const W = 140, H = 38, GX = 70, GY = 26, PAD = 20;
  let rows = 0;
  columns.forEach((col, i) => {
    col = col || [];
    col.sort((a, b) => (a.space + a.name < b.space + b.name ? -1 : 1));
    col.forEach((n, j) => {
      n.x = PAD + i * (W + GX);
      n.y = PAD + j * (H + GY);
    });
    rows = Math.max(rows, col.length);
  });
  const width = PAD * 2 + columns.length * (W + GX);
  const height = PAD * 2 + rows * (H + GY);
  // Scaled down to the page's width when wider (never up).
  let svg = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${width} ${height}" width="${width}" style="max-width:100%;height:auto" data-nodes="${nodes.size}" data-edges="${edges.length}">`;
  svg += '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#8a93a6"/></marker></defs>';
  for (const e of edges) {
    const x1 = e.from.x + W, y1 = e.from.y + H / 2, x2 = e.to.x, y2 = e.to.y + H / 2;
    const back = x2 <= x1;
    const mx = (x1 + x2) / 2;
    const d = back
      ? `M${x1},${y1} C${x1 + 60},${y1 - 70} ${x2 - 60},${y2 - 70} ${x2},${y2}`
      : `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`;
    svg += `<path class="edge" d="${d}" marker-end="url(#arrow)"/>`;
    svg += `<text class="edge-label" x="${mx}" y="${(y1 + y2) / 2 - 4}" text-anchor="middle">${fmtRate(e.rate)}/s</text>`;
  }
  for (const n of nodes.values()) {
    const c = color(n.space);
    const rx = n.kind === "task" ? 16 : 3;
    const fill = n.kind === "task" ? "#fff" : n.kind === "queue" ? "#fdf3e6" : "#eef3fa";
    svg += `<g class="node ${n.kind}" data-name="${esc(n.name)}">`;
    svg += `<rect x="${n.x}" y="${n.y}" width="${W}" height="${H}" rx="${rx}" fill="${fill}" stroke="${c}" stroke-width="2"/>`;
    svg += `<text x="${n.x + W / 2}" y="${n.y + 15}" text-anchor="middle" font-weight="bold">${esc(n.name.length > 20 ? n.name.slice(0, 19) + "…" : n.name)}</text>`;
    svg += `<text x="${n.x + W / 2}" y="${n.y + 30}" text-anchor="middle" fill="#6b7385">${esc(n.kind === "task" ? n.sub : n.kind + " · " + n.sub)}</text>`;
    svg += "</g>";
  }
  svg += "</svg>";
  document.getElementById("graph").innerHTML = nodes.size ? svg : "<p>No named containers or tasks yet.</p>";
  document.getElementById("legend").innerHTML = [...new Set([...nodes.values()].map((n) => n.space))]
    .map((s) => `<span><i style="background:${color(s)}"></i>${esc(short(s))}</span>`)
    .join("");
}

function pushPoint(arrays, point) {
  arrays.forEach((a, i) => {
    a.push(point[i]);
    if (a.length > HISTORY) a.shift();
  });
}

function zones(f, now) {
  const holders = new Map();
  for (const s of f.get("stampede_zone_watermark_holder") || []) {
    const k = spaceOf(s) + " " + label(s, "zone");
    const name = label(s, "name");
    holders.set(k, (holders.get(k) ? holders.get(k) + ", " : "") + label(s, "cause") + (name ? " " + name : ""));
  }
  const floors = new Map((f.get("stampede_zone_floor") || []).map((s) => [spaceOf(s) + " " + label(s, "zone"), value(s)]));
  const container = document.getElementById("zones");
  for (const s of f.get("stampede_zone_watermark") || []) {
    const k = spaceOf(s) + " " + label(s, "zone");
    let z = state.zones.get(k);
    if (!z) {
      const div = document.createElement("div");
      div.className = "zone";
      div.innerHTML = `<div><b>${esc(short(spaceOf(s)))}</b> zone ${esc(label(s, "zone"))}: <span class="holder"></span></div><div class="chart"></div>`;
      container.appendChild(div);
      z = { t: [], watermark: [], floor: [], div, plot: null };
      z.plot = new uPlot(
        {
          width: 420,
          height: 160,
          series: [{}, { label: "watermark", stroke: "#4c78a8", width: 2 }, { label: "floor", stroke: "#e45756", dash: [4, 4] }],
          axes: [{}, { size: 60 }],
        },
        [z.t, z.watermark, z.floor],
        div.querySelector(".chart"),
      );
      state.zones.set(k, z);
    }
    const finite = (v) => (Number.isFinite(v) && Math.abs(v) < EDGE ? v : null);
    pushPoint([z.t, z.watermark, z.floor], [now, finite(value(s)), finite(floors.get(k))]);
    z.plot.setData([z.t, z.watermark, z.floor]);
    z.div.querySelector(".holder").textContent =
      "watermark " + fmtTs(value(s)) + ", held by " + (holders.get(k) || "nothing");
  }
}

function containers(f, now) {
  const get = (name, s) =>
    (f.get(name) || []).find((o) => label(o, "container") === label(s, "container") && spaceOf(o) === spaceOf(s));
  const items = f.get("stampede_container_items") || [];
  const most = Math.max(1, ...items.map(value));
  const count = (name, s) => {
    const o = get(name, s);
    return o ? `<span class="${value(o) > 0 && name !== "stampede_container_reclaimed" ? "warn" : ""}">${value(o)}</span>` : "–";
  };
  const rows = items
    .slice()
    .sort((a, b) => (label(a, "container") < label(b, "container") ? -1 : 1))
    .map((s) => {
      const puts = get("stampede_container_puts", s);
      const gets = get("stampede_container_gets", s);
      return [
        esc(label(s, "container")),
        esc(label(s, "kind")),
        `<span style="color:${color(spaceOf(s))}">■</span> ${esc(short(spaceOf(s)))}`,
        value(s),
        `<span class="bar" style="width:${Math.round((80 * value(s)) / most)}px"></span>`,
        puts ? fmtRate(rate(puts, now)) : "–",
        gets ? fmtRate(rate(gets, now)) : "–",
        count("stampede_container_skipped", s),
        count("stampede_container_full", s),
        count("stampede_container_reclaimed", s),
        count("stampede_container_redelivered", s),
      ];
    });
  fillTable("containers", rows);
}

function tasks(f, now) {
  const of = (name, s) => (f.get(name) || []).find((o) => label(o, "task") === label(s, "task") && spaceOf(o) === spaceOf(s) && label(o, "zone") === label(s, "zone"));
  const rows = (f.get("stampede_task_virtual_time") || []).map((s) => {
    const vis = of("stampede_task_visibility", s);
    const blocked = of("stampede_task_blocked_seconds", s);
    const r = blocked ? rate(blocked, now) : undefined;
    return [
      esc(label(s, "task")),
      `<span style="color:${color(spaceOf(s))}">■</span> ${esc(short(spaceOf(s)))}`,
      esc(label(s, "zone")),
      fmtTs(value(s)),
      vis ? fmtTs(value(vis)) : "–",
      r === undefined ? "–" : Math.min(100, r * 100).toFixed(0) + "%",
    ];
  });
  fillTable("tasks", rows);
}

function executors(f, now) {
  const jobs = f.get("stampede_executor_jobs") || [];
  document.getElementById("executor-section").hidden = jobs.length === 0;
  const names = new Set(jobs.map((s) => spaceOf(s) + " " + label(s, "executor")));
  for (const name of names) {
    const mine = jobs.filter((s) => spaceOf(s) + " " + label(s, "executor") === name);
    const workers = mine.map((s) => label(s, "worker"));
    let e = state.executors.get(name);
    if (!e || e.workersKey !== workers.join(",")) {
      if (e) e.div.remove();
      const div = document.createElement("div");
      div.innerHTML = `<div><b>${esc(name)}</b> <span class="queues"></span></div><div class="chart"></div>`;
      document.getElementById("executors").appendChild(div);
      e = { t: [], series: workers.map(() => []), div, workersKey: workers.join(",") };
      e.plot = new uPlot(
        {
          width: 860,
          height: 180,
          series: [{}, ...workers.map((w, i) => ({ label: "worker " + w, stroke: PALETTE[i % PALETTE.length], width: 1.5 }))],
          axes: [{}, { size: 60, label: "jobs/s" }],
        },
        [e.t, ...e.series],
        div.querySelector(".chart"),
      );
      state.executors.set(name, e);
    }
    pushPoint([e.t, ...e.series], [now, ...mine.map((s) => rate(s, now) ?? null)]);
    e.plot.setData([e.t, ...e.series]);
    const sum = (metric) =>
      (f.get(metric) || []).filter((s) => spaceOf(s) + " " + label(s, "executor") === name).reduce((a, s) => a + value(s), 0);
    e.div.querySelector(".queues").textContent =
      `steals ${sum("stampede_executor_steals")}, queued in workers ${sum("stampede_executor_queued")}, global ${sum("stampede_executor_global_queued")}, critical path ${sum("stampede_executor_urgent_queued")}`;
  }
}

async function poll() {
  const status = document.getElementById("status");
  try {
    const answer = await fetch("api/samples", { cache: "no-store" });
    if (!answer.ok) throw new Error(answer.status + " " + answer.statusText);
    const snap = await answer.json();
    const now = snap.time;
    document.getElementById("title").textContent = snap.title;
    const f = byName(snap.samples);
    spaces(f, now);
    graph(f, now);
    zones(f, now);
    containers(f, now);
    tasks(f, now);
    executors(f, now);
    state.prev = { t: now, values: new Map(snap.samples.map((s) => [key(s), value(s)])) };
    state.refreshes += 1;
    document.body.dataset.refreshes = String(state.refreshes);
    status.className = "";
    status.textContent = "updated " + new Date(now * 1000).toLocaleTimeString() + ` · ${snap.samples.length} samples`;
  } catch (e) {
    status.className = "stale";
    status.textContent = "no answer: " + e.message + " (retrying)";
  }
  setTimeout(poll, POLL_MS);
}

poll();
