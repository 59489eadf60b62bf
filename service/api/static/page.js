// The live page: polls the REST API (relative URLs, so it works behind a path prefix) and draws
// what it answers. Every text from the API goes in through textContent, never as HTML: agent
// names and alert evidence are texts written by agents, some of them hostile.
"use strict";

const params = new URLSearchParams(location.search);
const REFRESH_S = Math.max(0.5, Number(params.get("refresh")) || 5);
const POINTS = 720;  // points a chart asks for (the store keeps MOLTSCOPE_SERIES_POINTS)
const COLORS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
                "#ff9da7", "#9c755f", "#bab0ac"];

// Charts of the society's vitals. `metrics`: sample names (or patterns) whose recent series
// the store keeps; `keep` picks label sets; `label` names a line.
const CHARTS = [
  {id: "activity", title: "Activity per bucket (event time)", activity: true},
  {id: "similarity", title: "Semantic similarity",
   metrics: ["centroid_similarity", "pairwise_similarity", /^knn\d+_similarity$/],
   label: (name, l) => name.replace(/_similarity$/, "") + labelText(l, " ")},
  {id: "ngrams", title: "N-gram turnover (latest settled day)",
   metrics: ["ngram_birth_rate", "ngram_death_rate"],
   label: (name, l) => name.replace("ngram_", "").replace("_rate", "") + labelText(l, " ")},
  {id: "pagerank", title: "PageRank mass of the top k (window graph)",
   metrics: ["pagerank_top_mass"], keep: (l) => !l.graph || l.graph === "window",
   label: (name, l) => `top ${l.k ?? ""}`},
  {id: "depth", title: "Thread depth (mean max reply depth)", metrics: ["thread_depth"],
   label: (name, l) => labelText(l, "") || name},
  {id: "noreply", title: "No-reply share (posts without comments)",
   metrics: ["threads_uncommented_ratio"], label: (name, l) => labelText(l, "") || name},
];
const ACTIVITY_FIELDS = ["posts", "comments", "active_agents", "new_agents"];
const TILES = [
  ["posts_total", "posts"], ["comments_total", "comments"], ["agents_total", "agents"],
  ["vote_changes_total", "vote changes"], ["events_processed_total", "events processed"],
  ["alerts_firing", "alerts firing"],
];

const $ = (sel) => document.querySelector(sel);

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c);
  return node;
}

/** Integers exactly; other numbers to 4 significant digits, or 1 decimal from 10,000 up
 * (so that a time in unix seconds keeps its seconds). */
function fmt(v) {
  if (v === null || v === undefined || Number.isNaN(v)) return "–";
  if (typeof v !== "number") return String(v);
  if (Number.isInteger(v)) return String(v);
  if (Math.abs(v) >= 1e4 && Math.abs(v) < 1e15) return String(Math.round(v * 10) / 10);
  return String(Number(v.toPrecision(4)));
}

/** An ISO date-time from the API, shown as UTC to the second. */
function when(iso) {
  const t = Date.parse(iso || "");
  return Number.isNaN(t) ? (iso || "–") : isoTime(t / 1000);
}

function labelText(labels, lead) {
  const items = Object.entries(labels || {}).sort(([a], [b]) => a.localeCompare(b));
  return items.length ? lead + items.map(([k, v]) => `${k}=${v}`).join(", ") : "";
}

function isoTime(t) {
  return t === null || t === undefined ? "–" : new Date(t * 1000).toISOString()
    .replace("T", " ").replace(/\.\d+Z$/, " UTC");
}

function ago(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  const s = Math.abs(seconds);
  const text = s < 90 ? `${s.toFixed(0)} s` : s < 5400 ? `${(s / 60).toFixed(0)} min`
    : s < 172800 ? `${(s / 3600).toFixed(1)} h` : `${(s / 86400).toFixed(1)} d`;
  return seconds < 0 ? `in ${text}` : `${text} ago`;
}

async function getJSON(url) {
  const r = await fetch(url, {cache: "no-store"});
  if (!r.ok) throw new Error(`${url} answered ${r.status}`);
  return r.json();
}

// ---------------------------------------------------------------- state of one refresh

const state = {metrics: null, details: new Set(), charts: new Map(), errors: [],
               unfolded: new Set()};

async function attempt(what, fn) {
  try {
    await fn();
  } catch (err) {
    state.errors.push(`${what}: ${err.message}`);
  }
}

// ---------------------------------------------------------------- stream, tiles, values

function renderHealth(h) {
  const box = $("#health");
  box.replaceChildren();
  for (const [name, up] of Object.entries(h.components || {})) {
    box.append(el("span", {class: `pill ${up ? "up" : "down"}`, "data-component": name,
                           text: `${name} ${up ? "up" : "down"}`}));
  }
}

function sampleValue(samples, name) {
  const found = samples.filter((s) => s.name === name);
  if (!found.length) return null;
  return found.reduce((a, s) => a + s.value, 0);  // labelled ones (alerts_firing{type}): the sum
}

function crawlFacts(c) {
  // what `moltscope crawl` last committed (GET /v1/crawler): nothing when no crawler reports
  if (!c || !c.reported) return [];
  const pct = (x) => (x === undefined || x === null ? "–" : `${(100 * x).toFixed(1)} %`);
  const cap = c.capture_ratio || {};
  return [
    ["crawl", `${fmt(c.posts_tracked)} posts tracked${c.walk_in_progress ? ", listing walk under way" : ""}`
      + ` (${ago(Date.now() / 1000 - c.at)})`],
    ["comment deficit", `${fmt(c.comment_deficit)} on ${fmt(c.posts_with_deficit)} posts, `
      + `${fmt(c.backfill_pending_posts)} awaiting backfill`],
    ["capture vs /stats", `posts ${pct(cap.posts)}, comments ${pct(cap.comments)}`],
  ];
}

function renderProgress(m) {
  const now = Date.now() / 1000;
  const latest = sampleValue(m.samples, "event_time_latest_seconds");
  const dead = Object.entries(m.counters || {}).filter(([k]) => k.startsWith("dead_letters:"))
    .reduce((a, [, v]) => a + v, 0);
  const rate = state.eventRate;
  const facts = [
    ["snapshot", m.snapshot_at ? `${isoTime(m.snapshot_at)} (${ago(now - m.snapshot_at)})` : "none yet"],
    ["latest event time", latest ? `${isoTime(latest)} (${ago(now - latest)})` : "–"],
    ["events processed", fmt(sampleValue(m.samples, "events_processed_total"))],
    ["processing rate", rate === null || rate === undefined ? "–" : `${fmt(rate)} events/s`],
    ["dead letters", fmt(dead)],
    ...crawlFacts(state.crawler),
  ];
  $("#progress").replaceChildren(...facts.flatMap(([k, v]) => [el("dt", {text: k}),
                                                               el("dd", {text: v})]));
}

function renderTiles(samples) {
  const box = $("#vitals");
  box.replaceChildren();
  for (const [name, caption] of TILES) {
    const v = sampleValue(samples, name);
    if (v === null) continue;
    box.append(el("div", {class: "tile", "data-metric": name},
                  el("div", {class: "value", "data-value": String(v), text: fmt(v)}),
                  el("div", {class: "caption", text: caption})));
  }
}

function renderValues(m) {
  const rows = [...m.samples].sort((a, b) => a.name.localeCompare(b.name)
    || labelText(a.labels, "").localeCompare(labelText(b.labels, "")));
  $("#values-table tbody").replaceChildren(...rows.map((s) => el("tr", {
    "data-name": s.name, "data-labels": JSON.stringify(s.labels)},
    el("td", {text: s.name, title: s.help || ""}),
    el("td", {text: labelText(s.labels, "")}),
    el("td", {class: "num", "data-value": String(s.value), text: fmt(s.value)}),
    el("td", {text: s.kind}))));
  const counters = Object.entries(m.counters || {}).sort(([a], [b]) => a.localeCompare(b));
  $("#counters-table tbody").replaceChildren(...counters.map(([k, v]) => el("tr",
    {"data-counter": k}, el("td", {text: k}), el("td", {class: "num", text: fmt(v)}))));
}

// ---------------------------------------------------------------- charts

function chartBox(spec) {
  let box = document.getElementById(`chart-${spec.id}`);
  if (!box) {
    box = el("figure", {id: `chart-${spec.id}`, class: "panel chart"},
             el("figcaption", {text: spec.title}), el("div", {class: "plot"}),
             el("p", {class: "muted empty", text: "no data yet"}));
    if (spec.activity) {
      const pick = el("select", {"aria-label": "bucket", onchange: () => refresh()});
      for (const g of ["minute", "hour", "day"]) pick.append(el("option", {value: g, text: g}));
      box.querySelector("figcaption").append(" ", pick);
    }
    $("#charts").append(box);
  }
  return box;
}

/** One x axis for several [t, v] series: the union of their times, gaps as null. */
function align(lines) {
  const xs = [...new Set(lines.flatMap((l) => l.points.map((p) => p[0])))].sort((a, b) => a - b);
  const at = new Map(xs.map((x, i) => [x, i]));
  const ys = lines.map((l) => {
    const y = new Array(xs.length).fill(null);
    for (const [t, v] of l.points) y[at.get(t)] = v;
    return y;
  });
  return [xs, ...ys];
}

function draw(spec, lines) {
  const box = chartBox(spec);
  const plot = box.querySelector(".plot");
  box.querySelector(".empty").hidden = lines.some((l) => l.points.length);
  box.dataset.lines = String(lines.length);
  const data = align(lines);
  const names = lines.map((l) => l.name).join("\n");
  const old = state.charts.get(spec.id);
  if (old && old.names === names) {
    old.plot.setData(data);
    return;
  }
  if (old) old.plot.destroy();
  if (!lines.length) {
    state.charts.delete(spec.id);
    return;
  }
  const opts = {
    width: Math.max(280, plot.clientWidth || 400), height: 200,
    series: [{}, ...lines.map((l, i) => ({label: l.name, stroke: COLORS[i % COLORS.length],
                                          width: 1.5, spanGaps: true,
                                          value: (u, v) => fmt(v)}))],
    axes: [{}, {size: 56, values: (u, vals) => vals.map(fmt)}],
    legend: {live: true},
    cursor: {drag: {x: true, y: false}},
  };
  state.charts.set(spec.id, {names, plot: new uPlot(opts, data, plot)});
}

async function seriesLines(spec, samples) {
  const present = [...new Set(samples.map((s) => s.name))].filter((n) =>
    spec.metrics.some((m) => (m instanceof RegExp ? m.test(n) : m === n)));
  const lines = [];
  for (const name of present.sort()) {
    const got = await getJSON(`v1/metrics/${encodeURIComponent(name)}?last=${POINTS}`);
    for (const v of got.values) {
      if (spec.keep && !spec.keep(v.labels)) continue;
      lines.push({name: spec.label(name, v.labels), points: v.series});
    }
  }
  return lines.sort((a, b) => a.name.localeCompare(b.name, undefined, {numeric: true}));
}

async function activityLines(spec) {
  if (!state.details.has("activity")) return [];
  const box = chartBox(spec);
  const g = box.querySelector("select").value;
  const rows = ((await getJSON("v1/details/activity")) || {})[g] || [];
  const times = rows.map((r) => Date.parse(r.start) / 1000);
  return ACTIVITY_FIELDS.map((f) => ({
    name: f.replace("_", " "),
    points: rows.map((r, i) => [times[i], r[f]]).filter((p) => p[1] !== null),
  }));
}

async function renderCharts(samples) {
  for (const spec of CHARTS) {
    await attempt(spec.title, async () => {
      draw(spec, spec.activity ? await activityLines(spec) : await seriesLines(spec, samples));
    });
  }
}

// ---------------------------------------------------------------- alerts

function incidentId(a) {
  return `${a.fingerprint}:${Math.trunc(Date.parse(a.starts_at) / 1000)}`;
}

function evidenceValue(v) {
  if (v === null || typeof v !== "object") return el("span", {text: fmt(v)});
  if (Array.isArray(v)) {
    if (v.every((x) => x === null || typeof x !== "object")) {
      const shown = v.slice(0, 20).map(fmt).join(", ");
      return el("span", {text: v.length > 20 ? `${shown}, … (${v.length})` : shown});
    }
    if (v.every((x) => x && typeof x === "object" && !Array.isArray(x))) {
      const cols = [...new Set(v.flatMap((x) => Object.keys(x)))].slice(0, 8);
      return el("table", {class: "evidence-table"},
        el("thead", {}, el("tr", {}, ...cols.map((c) => el("th", {text: c})))),
        el("tbody", {}, ...v.slice(0, 12).map((x) => el("tr", {}, ...cols.map((c) =>
          el("td", {text: typeof x[c] === "object" && x[c] !== null
            ? JSON.stringify(x[c]) : fmt(x[c])}))))));
    }
  }
  return el("pre", {text: JSON.stringify(v, null, 1)});
}

// The shared evidence of detectors/evidence.py, shown as what it is; the rest as figures.
const SHOWN = new Set(["exemplars", "clusters", "timeline", "link", "cluster_jaccard",
                       "near_duplicate_share"]);

function exemplarList(list) {
  return el("ol", {class: "exemplars"}, ...list.map((x) => typeof x === "string"
    ? el("li", {}, el("q", {text: x}))
    : el("li", {"data-id": x.id || ""}, el("q", {text: x.text || ""}),
         el("span", {class: "muted by"}, " — ", x.agent ? agentLink(x.agent) : "(unknown)",
            ` · ${isoTime(x.t)} · ${x.id || ""}`))));
}

function clusterTable(ev) {
  const head = `near-duplicate clusters (word-set Jaccard ≥ ${fmt(ev.cluster_jaccard)}` +
    (ev.near_duplicate_share === null || ev.near_duplicate_share === undefined ? ")"
      : `; ${fmt(100 * ev.near_duplicate_share)} % of the texts kept are in one)`);
  return [el("h4", {text: head}), el("table", {class: "evidence-table clusters"},
    el("thead", {}, el("tr", {}, ...["texts", "agents", "from", "to", "text"].map((c) =>
      el("th", {text: c})))),
    el("tbody", {}, ...ev.clusters.map((c) => el("tr", {},
      el("td", {class: "num", text: fmt(c.size)}),
      el("td", {title: (c.agent_names || []).join(", "), text: fmt(c.agents)}),
      el("td", {text: isoTime(c.first_t)}), el("td", {text: isoTime(c.last_t)}),
      el("td", {text: c.text || ""})))))];
}

function timelineTable(tl) {
  const rest = tl.truncated ? ` (the first ${tl.entries.length} shown)` : "";
  const head = `timeline: ${fmt(tl.agents)} agents from ${isoTime(tl.start)}, ` +
    `${fmt(tl.leaders)} leading, median delay ${fmt(tl.median_delay_s)} s${rest}`;
  return [el("h4", {text: head}), el("table", {class: "evidence-table timeline"},
    el("thead", {}, el("tr", {}, ...["", "agent", "first act", "delay s", "acts", "item"].map(
      (c) => el("th", {text: c})))),
    el("tbody", {}, ...tl.entries.map((e) => el("tr", {class: e.role, "data-agent": e.agent},
      el("td", {text: e.role}), el("td", {}, agentLink(e.agent)),
      el("td", {text: isoTime(e.t)}), el("td", {class: "num", text: fmt(e.delay_s)}),
      el("td", {class: "num", text: fmt(e.acts)}), el("td", {text: e.id || "–"})))))];
}

function evidenceView(ev) {
  const parts = [];
  if (Array.isArray(ev.exemplars) && ev.exemplars.length) {
    parts.push(el("h4", {text: "exemplars"}), exemplarList(ev.exemplars));
  }
  if (Array.isArray(ev.clusters) && ev.clusters.length) parts.push(...clusterTable(ev));
  if (ev.timeline && Array.isArray(ev.timeline.entries) && ev.timeline.entries.length) {
    parts.push(...timelineTable(ev.timeline));
  }
  const rest = Object.entries(ev).filter(([k]) => !SHOWN.has(k));
  if (rest.length) {
    parts.push(el("h4", {text: "figures"}), el("dl", {},
      ...rest.flatMap(([k, v]) => [el("dt", {text: k}), el("dd", {}, evidenceValue(v))])));
  }
  return parts;
}

function alertCard(a, focus) {
  const id = incidentId(a);
  const ev = a.evidence || {};
  const card = el("article", {class: `card sev-${a.severity} state-${a.state}`,
                              id: `alert-${id}`, "data-incident": id, "data-type": a.type,
                              "data-fingerprint": a.fingerprint},
    el("div", {class: "card-head"},
      el("span", {class: `badge sev-${a.severity}`, text: a.severity}),
      el("span", {class: "badge", text: a.type}),
      el("span", {class: "badge", text: a.state}),
      el("a", {class: "permalink", href: `#alert-${id}`, text: "link"})),
    el("p", {class: "summary", text: a.summary}),
    el("p", {class: "muted", text: `${a.key} · started ${when(a.starts_at)}` +
                                   (a.ends_at ? ` · ended ${when(a.ends_at)}` : "") +
                                   ` · updated ${when(a.updated_at)}`}));
  if (Object.keys(ev).length) {
    const details = el("details", {class: "evidence", ontoggle: (e) => {
      if (e.target.open) state.unfolded.add(id); else state.unfolded.delete(id);
    }}, el("summary", {text: "evidence"}), ...evidenceView(ev));
    if (focus || state.unfolded.has(id)) details.open = true;  // kept open across refreshes
    card.append(details);
  }
  return card;
}

/** The incident a link names: `#alert-<fingerprint>:<start>`, or `#alert-<fingerprint>` for
 * the newest incident of that fingerprint. */
function linked() {
  return location.hash.startsWith("#alert-") ? decodeURIComponent(location.hash.slice(7)) : null;
}

function matches(a, focus) {
  return focus !== null && (incidentId(a) === focus || a.fingerprint === focus);
}

async function renderAlerts() {
  const alerts = await getJSON("v1/alerts?limit=60");
  const focus = linked();
  const open = alerts.filter((a) => a.state !== "resolved");
  const recent = alerts.filter((a) => a.state === "resolved").slice(0, 20);
  // the linked incident: the newest listed that matches, else asked for by its id
  let target = [...open, ...recent].find((a) => matches(a, focus)) || null;
  let away = null;
  if (focus !== null && target === null) {
    away = focus.includes(":")
      ? await fetch(`v1/alerts/${encodeURIComponent(focus)}`, {cache: "no-store"})
        .then((r) => (r.ok ? r.json() : null))
      : (await getJSON(`v1/alerts?fingerprint=${encodeURIComponent(focus)}&limit=1`))[0] || null;
    target = away;
  }
  $("#alerts-count").textContent = open.length ? `${open.length} open` : "";
  const fill = (box, list, none) => box.replaceChildren(...(list.length
    ? list.map((a) => alertCard(a, a === target))
    : [el("p", {class: "muted", text: none})]));
  $("#alerts-linked").replaceChildren(...(away ? [alertCard(away, true)]
    : focus !== null && target === null ? [el("p", {class: "muted",
                                                    text: `no incident ${focus}`})] : []));
  $("#alerts-linked-box").hidden = !away && !(focus !== null && target === null);
  fill($("#alerts-open"), open, "none open");
  fill($("#alerts-recent"), recent, "none resolved yet");
  if (target && state.focused !== focus) {
    const card = document.querySelector(`[data-incident="${CSS.escape(incidentId(target))}"]`);
    if (card) {
      card.classList.add("focus");
      card.scrollIntoView({block: "center"});
      state.focused = focus;
    }
  } else if (target) {
    document.querySelector(`[data-incident="${CSS.escape(incidentId(target))}"]`)
      ?.classList.add("focus");
  }
}

// ---------------------------------------------------------------- super-nodes and agents

function agentLink(name) {
  return el("a", {href: "#agent", class: "agent", text: name,
                  onclick: () => { $("#agent-name").value = name; lookUp(name); }});
}

async function renderSupernodes() {
  const body = $("#supernodes-table tbody");
  if (!state.details.has("pagerank_window")) {
    body.replaceChildren();
    $("#supernodes-meta").textContent = "no PageRank yet";
    return;
  }
  const win = await getJSON("v1/details/pagerank_window");
  const history = state.details.has("supernode_history")
    ? await getJSON("v1/details/supernode_history") : {};
  const daily = state.details.has("pagerank_daily") ? await getJSON("v1/details/pagerank_daily") : {};
  const days = Object.keys(daily || {}).sort().slice(-14);
  const score = new Map((win.top || []).map((t) => [t.agent, t.pagerank]));
  $("#supernodes-meta").textContent = `${(win.supernodes || []).length} above the largest ` +
    `PageRank gap in the window graph (${fmt(win.nodes)} agents, ${fmt(win.edges)} edges` +
    (win.time ? `, as of ${when(win.time)}` : "") + ")" +
    (days.length ? `; days: the last ${days.length}, dark when a super-node that day, light when ` +
                    "among the day's top-ranked" : "");
  body.replaceChildren(...(win.supernodes || []).map((name) => {
    const h = (history || {})[name] || {};
    const strip = el("span", {class: "strip"}, ...days.map((d) => {
      const top = (daily[d].top || []).findIndex((t) => t.agent === name);
      const on = (daily[d].supernodes || []).includes(name);
      return el("i", {class: on ? "on" : top >= 0 ? "top" : "",
                      title: `${d}: ${on ? "super-node" : top >= 0 ? "top-ranked" : "not top-ranked"}` +
                             (top >= 0 ? `, #${top + 1}, PageRank ${fmt(daily[d].top[top].pagerank)}` : "")});
    }));
    return el("tr", {"data-agent": name}, el("td", {}, agentLink(name)),
              el("td", {class: "num", text: fmt(score.get(name))}),
              el("td", {text: when(h.current_streak_since || h.first_seen)}),
              el("td", {class: "num", text: fmt(h.windows)}), el("td", {}, strip));
  }));
}

async function lookUp(name) {
  const out = $("#agent-result");
  name = name.trim();
  if (!name) return;
  out.replaceChildren(el("p", {class: "muted", text: `looking up ${name}…`}));
  let r;
  try {
    r = await fetch(`v1/agents/${encodeURIComponent(name)}`, {cache: "no-store"});
  } catch (err) {
    out.replaceChildren(el("p", {class: "error", text: `look-up failed: ${err.message}`}));
    return;
  }
  if (r.status === 404) {
    out.replaceChildren(el("p", {class: "muted", text: `no agent ${name} in the interaction graph`}));
    return;
  }
  if (!r.ok) {
    out.replaceChildren(el("p", {class: "error", text: `look-up failed: ${r.status}`}));
    return;
  }
  const a = await r.json();
  const graph = (g) => (a[g] ? `#${a[g].rank} of ${a[g].of} · PageRank ${fmt(a[g].pagerank)}` : "–");
  const h = a.supernode_history;
  const facts = [
    ["window graph", graph("window")], ["cumulative graph", graph("cumulative")],
    ["role", a.role === null || a.role === undefined ? "–" : a.role === 0 ? "periphery" : `role ${a.role}`],
    ["super-node", h ? `${fmt(h.windows)} windows, first ${when(h.first_seen)}, ` +
                       `last ${when(h.last_seen)}` +
                       (h.current_streak_since ? `, streak since ${when(h.current_streak_since)}`
                        : "")
                     : "never"],
  ];
  out.replaceChildren(el("h3", {text: a.agent}), el("dl", {class: "facts", "data-agent": a.agent},
    ...facts.flatMap(([k, v]) => [el("dt", {text: k}), el("dd", {text: v})])));
}

// ---------------------------------------------------------------- the loop

function eventRate(series) {
  // events/s over the stored points of events_processed_total (wall-clock times)
  if (!series || series.length < 2) return null;
  const [t0, v0] = series[Math.max(0, series.length - 12)];
  const [t1, v1] = series[series.length - 1];
  return t1 > t0 ? (v1 - v0) / (t1 - t0) : null;
}

let running = null;

async function refresh() {
  if (running) return running;
  running = (async () => {
    state.errors = [];
    await attempt("health", async () => renderHealth(await getJSON("healthz")));
    await attempt("metrics", async () => {
      const m = await getJSON("v1/metrics");
      state.metrics = m;
      state.details = new Set(await getJSON("v1/details"));
      if (m.samples.some((s) => s.name === "events_processed_total")) {
        const got = await getJSON(`v1/metrics/events_processed_total?last=60`);
        state.eventRate = eventRate(got.values[0] && got.values[0].series);
      }
      state.crawler = await getJSON("v1/crawler");
      renderProgress(m);
      renderTiles(m.samples);
      renderValues(m);
    });
    if (state.metrics) await renderCharts(state.metrics.samples);
    await attempt("alerts", renderAlerts);
    await attempt("super-nodes", renderSupernodes);
    $("#status").textContent = state.errors.length ? state.errors.join("; ")
      : `refreshed ${new Date().toLocaleTimeString()} · every ${REFRESH_S} s`;
    $("#status").className = state.errors.length ? "error" : "muted";
    document.body.dataset.refreshed = String(Number(document.body.dataset.refreshed || 0) + 1);
  })();
  try {
    await running;
  } finally {
    running = null;
  }
}

$("#agent-form").addEventListener("submit", (e) => {
  e.preventDefault();
  lookUp($("#agent-name").value);
});
window.addEventListener("hashchange", () => {
  if (location.hash.startsWith("#alert-")) refresh();
});
window.addEventListener("resize", () => {
  for (const [id, c] of state.charts) {
    const plot = document.querySelector(`#chart-${id} .plot`);
    c.plot.setSize({width: Math.max(280, plot.clientWidth), height: 200});
  }
});
for (const spec of CHARTS) chartBox(spec);  // in this order, whichever answers first
refresh();
setInterval(refresh, REFRESH_S * 1000);
