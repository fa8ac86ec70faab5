/* /dashboard: live figures read every 2 s from /api/v1/stats/* and /api/v1/alerts, with filters and a
   drill-down from a point, a table row or an alert to the window's worst and failing results. */
"use strict";
const $ = (id) => document.getElementById(id);
const pct = (v) => (v === null || v === undefined ? "—" : `${(v * 100).toFixed(1)}%`);
const fixed = (v, d) => (v === null || v === undefined ? "—" : Number(v).toFixed(d));
const money = (v) => (v === null || v === undefined ? "—" : `$${v < 1 ? v.toFixed(4) : v.toFixed(2)}`);
const ms = (v) => (v === null || v === undefined ? "—" : `${v < 10 ? v.toFixed(1) : Math.round(v)} ms`);
/* The grading scales (stream/grading.py), each drawn on its own chart: never two scales on one axis. */
const SCALES = {
  levels: ["excellent", "good", "pass", "fail", "severe_defect"],
  letters: ["A+", "A", "A-", "B+", "B", "B-", "C+", "C", "C-", "D", "F"],
};
/* Pairs drawn as lines of their own, by events in the range shown; the rest share one "others" line. */
const TOP_PAIRS = 8, TOP_LATENCY_PAIRS = 4;
const OTHERS_COLOR = "#98a2b3";
const q = encodeURIComponent;

const state = { model: "", suite: "", size: null, range: "", examples: null, version: "" };
const versionArg = () => (state.version ? `&version=${q(state.version)}` : "");
const pairName = (p) => `${p.model} × ${p.suite}${p.version && !p.current ? ` @${p.version}` : ""}`;
const wanted = (p) => (!state.model || p.model === state.model) && (!state.suite || p.suite === state.suite);
const cell = (text, cls) => SE.el("td", { class: cls, title: String(text) }, String(text));

/* Keep a <select>'s options in step with the values seen, without losing the user's choice (or a link's). */
function options(select, values, allLabel, chosen) {
  const current = chosen || select.value;
  const have = [...select.options].map((o) => o.value);
  const want = ["", ...values];
  if (have.join("\u0000") !== want.join("\u0000")) {
    select.replaceChildren(...want.map((v) => SE.el("option", { value: v }, v === "" ? allLabel : v)));
    select.value = want.includes(current) ? current : "";
  }
}

/* A link into one window, as alert notifications give (docs/notify.md): ?model=&suite=&size=&window=
   (RFC 3339 start). Sets the filters; returns the window's start in seconds to open its examples, or null. */
function fromLink() {
  const p = new URLSearchParams(location.search);
  state.model = p.get("model") || "";
  state.suite = p.get("suite") || "";
  if (Number(p.get("size")) > 0) state.size = Number(p.get("size"));
  const start = Date.parse(p.get("window") || "");
  return state.model && state.suite && state.size && !Number.isNaN(start) ? start / 1000 : null;
}

/* The pairs with the most events first (ties by name), cut at `top`: { top, rest }. */
function byVolume(shown, top) {
  const volume = new Map(shown.map((s) => [s, s.points.reduce((n, p) => n + p.count, 0)]));
  const ranked = [...shown].sort((a, b) => volume.get(b) - volume.get(a) || pairName(a).localeCompare(pairName(b)));
  return { top: ranked.slice(0, top), rest: ranked.slice(top) };
}

/* One line for the folded pairs: per window, the count-weighted mean of `value` over them. */
function othersLine(rest, value, name) {
  const acc = new Map();
  for (const s of rest) for (const p of s.points) {
    const v = value(p);
    if (v === null || v === undefined || !p.count) continue;
    const [sum, n] = acc.get(p.start) || [0, 0];
    acc.set(p.start, [sum + v * p.count, n + p.count]);
  }
  const points = [...acc.entries()].sort((a, b) => a[0] - b[0]).map(([x, [sum, n]]) => ({ x, y: sum / n }));
  return { name, others: true, color: OTHERS_COLOR, points };
}

/* A chart's series: the top pairs, each its own line, and one "others" line for the rest. */
function pairLines(shown, top, value, suffix = "") {
  const { top: mine, rest } = byVolume(shown, top);
  const lines = mine.map((s) => ({ name: pairName(s) + suffix, model: s.model, suite: s.suite, version: s.current ? "" : s.version || "legacy",
    points: s.points.map((p) => ({ x: p.start, y: value(p) })) }));
  if (rest.length) lines.push(othersLine(rest, value, `others (${rest.length} pairs)${suffix}`));
  return { lines, folded: rest.length };
}

/* The legend of a chart: one swatch per line, in the chart's colours, and a note on what was folded. */
function legend(target, lines, colors, folded) {
  const entries = lines.map((s, i) => SE.el("span", { "data-series": s.name }, SE.swatch(s.color || colors[i % colors.length]), s.name));
  if (folded) entries.push(SE.el("span", { class: "note" }, `${folded} smaller pairs in "others": pick a model or suite above to see them`));
  target.replaceChildren(...entries);
}

/* Grade counts of the shown pairs, one chart per scale (a scale without results is not drawn). */
function gradeCharts(all) {
  const counts = { levels: {}, letters: {}, other: {} };
  for (const p of all) for (const [g, n] of Object.entries(p.grades)) {
    const scale = Object.keys(SCALES).find((k) => SCALES[k].includes(g)) || "other";
    counts[scale][g] = (counts[scale][g] || 0) + n;
  }
  for (const scale of Object.keys(SCALES)) {
    const items = SCALES[scale].filter((g) => counts[scale][g]).map((g) => ({ name: g, value: counts[scale][g] }));
    const none = !Object.keys(counts.levels).length && !Object.keys(counts.letters).length;
    $(`grades-${scale}`).hidden = !items.length && !(scale === "levels" && none);
    Charts.bars($(`grade-${scale}-chart`), items, { width: 360, height: 200 });
  }
  const other = Object.entries(counts.other).sort(([a], [b]) => a.localeCompare(b)).map(([name, value]) => ({ name, value }));
  $("grades-other").hidden = !other.length;
  Charts.bars($("grade-other-chart"), other, { width: 360, height: 200 });
  const passed = all.reduce((n, p) => n + Math.round((p.passRate || 0) * p.count), 0);
  const total = all.reduce((n, p) => n + p.count, 0);
  Charts.bars($("grade-verdict-chart"), total ? [{ name: "passed", value: passed }, { name: "failed", value: total - passed }] : [], { width: 360, height: 200 });
}

/* Consumer lag from the worker's /metrics (absent when the API runs without a worker). */
async function consumerLag() {
  const headers = SE.token() ? { Authorization: "Bearer " + SE.token() } : {};
  try {
    const resp = await fetch("/metrics", { headers });
    if (!resp.ok) return null;
    let total = null;
    for (const line of (await resp.text()).split("\n")) {
      if (line.startsWith("streameval_consumer_lag{") || line.startsWith("streameval_consumer_lag ")) {
        total = (total || 0) + Number(line.slice(line.lastIndexOf(" ") + 1));
      }
    }
    return total;
  } catch (e) { return null; }
}

async function refresh() {
  const size = state.size ? `&size=${state.size}` : "";
  const last = state.range && state.size ? Math.min(240, Math.ceil(Number(state.range) / state.size)) : 30;
  const [pairs, windows, dead, alerts] = await Promise.all([
    SE.api("GET", `/api/v1/stats/pairs?limit=500${versionArg()}`), SE.api("GET", `/api/v1/stats/windows?last=${last}${size}&limit=${Math.min(500, Math.floor(6000 / last))}${versionArg()}`),
    SE.api("GET", `/api/v1/stats/deadletters?last=${last}${size}`), SE.api("GET", "/api/v1/alerts?limit=20"),
  ]);
  const failed = [pairs, windows, dead, alerts].find((r) => !r.ok);
  if (failed) { $("message").className = "message error"; $("message").textContent = SE.errorText(failed); return; }
  $("message").textContent = "";
  listVersions();
  const everyPair = pairs.payload.data;
  options($("filter-model"), [...new Set(everyPair.map((p) => p.model))].sort(), "all models", state.model);
  options($("filter-suite"), [...new Set(everyPair.map((p) => p.suite))].sort(), "all suites", state.suite);
  const all = everyPair.filter(wanted);
  const total = all.reduce((n, p) => n + p.count, 0);
  const sum = all.reduce((n, p) => n + (p.mean || 0) * p.count, 0);
  const passes = all.reduce((n, p) => n + (p.passRate || 0) * p.count, 0);
  const deadTotal = Object.values(dead.payload.data.total).reduce((a, b) => a + b, 0);
  $("total-events").textContent = String(total);
  $("mean-score").textContent = total ? (sum / total).toFixed(3) : "—";
  $("pass-rate").textContent = total ? pct(passes / total) : "—";
  $("dead-letters").textContent = `${deadTotal} (${pct(total + deadTotal ? deadTotal / (total + deadTotal) : null)})`;
  const tokens = all.reduce((n, p) => n + (p.tokens ? p.tokens.prompt + p.tokens.completion : 0), 0);
  $("judge-tokens").textContent = tokens.toLocaleString();
  const costs = all.map((p) => p.cost).filter((c) => c !== null && c !== undefined);
  $("judge-cost").textContent = costs.length ? money(costs.reduce((a, b) => a + b, 0)) : "—";
  $("gate-failures").textContent = String(all.reduce((n, p) => n + Object.values(p.gateFailures || {}).reduce((a, b) => a + b, 0), 0));

  const w = windows.payload.data;
  if (!state.size) state.size = w.size;
  const sizeSelect = $("filter-size");
  if (sizeSelect.options.length !== (w.sizes || [w.size]).length) {
    sizeSelect.replaceChildren(...(w.sizes || [w.size]).map((s) => SE.el("option", { value: s }, `${s} s`)));
  }
  sizeSelect.value = String(w.size);
  $("window-size").textContent = `· ${w.size}-second windows`;
  const since = state.range ? Date.now() / 1000 - Number(state.range) : -Infinity;
  const shown = w.series.filter(wanted).map((s) => ({ ...s, points: s.points.filter((p) => p.start >= since) }));
  const score = pairLines(shown, TOP_PAIRS, (p) => p.mean);
  const colors = Charts.line($("score-chart"), score.lines, { onPoint: (s, p) => openExamples(s.model, s.suite, w.size, p.x, "worst", [], s.version) });
  legend($("score-legend"), score.lines, colors, score.folded);
  const pass = pairLines(shown, TOP_PAIRS, (p) => p.passRate);
  const passColors = Charts.line($("pass-chart"), pass.lines,
    { width: 540, height: 200, percent: true, onPoint: (s, p) => openExamples(s.model, s.suite, w.size, p.x, "failing", [], s.version) });
  legend($("pass-legend"), pass.lines, passColors, pass.folded);

  // throughput: events of the shown pairs per window, per second
  const perWindow = new Map();
  for (const s of shown) for (const p of s.points) perWindow.set(p.start, (perWindow.get(p.start) || 0) + p.count);
  const rate = [...perWindow.entries()].sort((a, b) => a[0] - b[0]).map(([x, n]) => ({ x, y: n / w.size }));
  Charts.line($("throughput-chart"), [{ name: "events/s", points: rate }], { width: 540, height: 200, yMax: null, format: (y) => y.toFixed(y < 10 ? 2 : 0) });
  $("throughput").textContent = rate.length ? `${rate[rate.length - 1].y.toFixed(2)}/s` : "—";
  const p95 = pairLines(shown, TOP_LATENCY_PAIRS, (p) => p.latencyP95Ms, " p95");
  const p50 = pairLines(shown, TOP_LATENCY_PAIRS, (p) => p.latencyP50Ms, " p50");
  const latency = p95.lines.flatMap((s, i) => [s, p50.lines[i]]);
  for (const s of latency) if (s.others && s.name.endsWith("p50")) s.color = "#667085";
  const latencyColors = Charts.line($("latency-chart"), latency, { width: 540, height: 200, yMax: null, format: (y) => `${Math.round(y)}` });
  legend($("latency-legend"), latency, latencyColors, p95.folded);

  // judge cost per judge and window (the shown pairs summed)
  const cost = new Map();
  for (const s of shown) for (const p of s.points) for (const [name, j] of Object.entries(p.judges || {})) {
    if (j.cost === null || j.cost === undefined) continue;
    if (!cost.has(name)) cost.set(name, new Map());
    cost.get(name).set(p.start, (cost.get(name).get(p.start) || 0) + j.cost);
  }
  const costSeries = [...cost.entries()].map(([name, m]) => ({ name, points: [...m.entries()].sort((a, b) => a[0] - b[0]).map(([x, y]) => ({ x, y })) }));
  const costColors = Charts.line($("cost-chart"), costSeries, { height: 200, yMax: null, format: (y) => `$${y.toFixed(y < 1 ? 4 : 2)}` });
  $("cost-legend").replaceChildren(...(costSeries.length ? costSeries.map((s, i) => SE.el("span", {}, SE.swatch(costColors[i % costColors.length]), s.name))
    : [SE.el("span", { class: "muted" }, "no judge prices configured, or no judged events")]));

  // dead-letter rate per window: dead letters / (results + dead letters) of that window
  const results = new Map();
  for (const s of w.series) for (const p of s.points) results.set(p.start, (results.get(p.start) || 0) + p.count);
  const deadPoints = dead.payload.data.points.filter((p) => p.start >= since).map((p) => {
    const n = Object.values(p.kinds).reduce((a, b) => a + b, 0);
    return { x: p.start, y: n / (n + (results.get(p.start) || 0)) };
  });
  const starts = new Set(deadPoints.map((p) => p.x));
  for (const [start] of results) if (!starts.has(start) && start >= since) deadPoints.push({ x: start, y: 0 });
  deadPoints.sort((a, b) => a.x - b.x);
  Charts.line($("deadletter-chart"), [{ name: "dead letters", points: deadPoints }], { width: 540, height: 200, percent: true });

  gradeCharts(all);

  const list = alerts.payload.data.filter(wanted);
  $("no-alerts").hidden = list.length > 0;
  // alert v1 (schemas/alert.v1.json): rule, severity, model, suite, window, message, fired_at, examples
  $("alerts").replaceChildren(...list.map((a) => SE.el("li", {
    class: `alert clickable ${a.severity || ""}`, title: "show the results behind this alert",
    onclick: () => a.window && openExamples(a.model, a.suite, a.window.size_s, Date.parse(a.window.start) / 1000, "worst", a.examples || [], a.suite_version || ""),
  }, SE.el("span", { class: "badge" }, a.severity || "alert"), " ", SE.time(a.fired_at), " ",
  SE.el("b", {}, a.rule || "?"), ` · ${a.model || ""} × ${a.suite || ""}: ${a.message || ""}`,
  (a.examples || []).length ? SE.el("span", { class: "muted" }, ` · examples: ${a.examples.join(", ")}`) : "")));

  $("pairs-table").querySelector("tbody").replaceChildren(...all.map((p) => SE.el("tr", {
    class: "clickable", "data-model": p.model, "data-suite": p.suite, title: "show the latest window's worst results",
    onclick: () => openExamples(p.model, p.suite, w.size, null, "worst", [], p.current ? "" : p.version || "legacy"),
  }, cell(p.model, "wrap"), cell(p.version && !p.current ? `${p.suite} @${p.version}` : p.suite, "wrap"), cell(p.count), cell(p.mean === null ? "—" : p.mean.toFixed(3)), cell(pct(p.passRate)),
  cell(ms(p.latencyP50Ms)), cell(ms(p.latencyP95Ms)),
  cell(Object.entries(p.gateFailures || {}).map(([g, n]) => `${g} ${n}`).join(", ") || "0", "wrap"),
  cell(Object.values(p.evaluators).reduce((n, e) => n + e.errors, 0)))));

  const evaluatorRows = [];
  for (const p of all) for (const [name, e] of Object.entries(p.evaluators)) {
    evaluatorRows.push(SE.el("tr", {}, cell(p.model, "wrap"), cell(p.suite, "wrap"), cell(name, "wrap"), cell(e.count), cell(fixed(e.mean, 3)), cell(e.errors)));
  }
  $("evaluators-table").querySelector("tbody").replaceChildren(...evaluatorRows);

  const judgeRows = [], agreementRows = [];
  for (const p of all) {
    for (const [name, j] of Object.entries(p.judges)) {
      judgeRows.push(SE.el("tr", {}, cell(p.model, "wrap"), cell(p.suite, "wrap"), cell(name, "wrap"),
        cell(j.n), cell(fixed(j.mean, 2)), cell(fixed(j.sd, 2)), cell(j.calls), cell(j.errors), cell(j.cacheHits),
        cell((j.tokens || 0).toLocaleString()), cell(money(j.cost))));
    }
    if (Object.keys(p.judges).length) {
      const pearson = Object.entries(p.pearson || {}).map(([k, r]) => `${k.replace("|", " ~ ")}: ${fixed(r, 2)}`).join(", ") || "—";
      agreementRows.push(SE.el("tr", {}, cell(p.model, "wrap"), cell(p.suite, "wrap"), cell(fixed(p.alpha, 3)), cell(pearson, "wrap"), cell(fixed(p.consistency, 3))));
    }
  }
  $("judges-table").querySelector("tbody").replaceChildren(...judgeRows);
  $("agreement-table").querySelector("tbody").replaceChildren(...agreementRows);
  // agreement with people: one read per pair (the first 20 pairs shown), all time
  const humanRows = [];
  for (const p of all.slice(0, 20)) {
    const h = await SE.api("GET", `/api/v1/stats/human?model=${q(p.model)}&suite=${q(p.suite)}`);
    const a = h.ok ? h.payload.data.agreement : null;
    if (!a) continue;
    const raters = Object.entries(a.raters);
    if (a.annotators) raters.push(["(annotators)", a.annotators]);
    for (const [rater, f] of raters) {
      humanRows.push(SE.el("tr", {}, cell(p.model, "wrap"), cell(p.suite, "wrap"), cell(rater, "wrap"), cell(f.n),
        cell(fixed(f.kappa, 3)), cell(fixed(f.alpha, 3)), cell(fixed(f.pearson, 3)), cell(fixed(f.spearman, 3)),
        cell(fixed(f.mae, 3)), cell(fixed(f.bias, 3))));
    }
  }
  $("human-table").querySelector("tbody").replaceChildren(...humanRows);
  $("no-human").hidden = humanRows.length > 0;
  $("no-judges").hidden = judgeRows.length > 0;
  const lag = await consumerLag();
  $("consumer-lag").textContent = lag === null ? "—" : lag.toLocaleString();
  $("updated").textContent = new Date().toLocaleTimeString();
}

/* The drill-down: the worst or failing results kept for one window (null: the pair's latest). */
async function openExamples(model, suite, size, start, kind, highlight = [], version = "") {
  state.examples = { model, suite, size, start, kind, highlight, version };
  $("examples-panel").hidden = false;
  $("result-detail").hidden = true;
  for (const b of $("examples-kind").querySelectorAll("button")) b.classList.toggle("active", b.dataset.kind === kind);
  const windowArg = start === null ? "" : `&window=${start}`;
  const r = await SE.api("GET", `/api/v1/stats/examples?model=${q(model)}&suite=${q(suite)}&size=${size}&kind=${kind}${windowArg}${version ? `&version=${q(version)}` : ""}`);
  const body = $("examples-table").querySelector("tbody");
  if (!r.ok) { $("examples-note").textContent = SE.errorText(r); body.replaceChildren(); return; }
  const d = r.payload.data;
  state.examples.start = d.window;
  const when = d.window === null ? "no window with examples yet" : `${size}-second window from ${new Date(d.window * 1000).toLocaleString()}`;
  $("examples-title").textContent = `Examples · ${model} × ${suite} · ${when}`;
  $("examples-note").textContent = kind === "worst"
    ? `the ${d.examples.length} lowest-scored results kept for this window, lowest first; click one for its details`
    : `${d.examples.length} failed results of this window (a sample of them all), latest first; click one for its details`;
  body.replaceChildren(...d.examples.map((e) => {
    const low = [...(e.evaluators || [])].sort((a, b) => a.score - b.score)[0];
    const why = e.reason || (low ? `${low.name} ${low.score.toFixed(2)}: ${low.error || low.reason || ""}` : "");
    return SE.el("tr", { class: `clickable${highlight.includes(e.id) ? " highlight" : ""}`, "data-id": e.id, onclick: () => showResult(e) },
      cell(e.id, "wrap"), cell(e.score.toFixed(3)), cell(e.grade), cell(e.passed ? "yes" : "no", e.passed ? "pass" : "fail"),
      cell((e.failed_gates || []).join(", ") || "—"), cell(why, "wrap"));
  }));
  $("examples-panel").scrollIntoView({ block: "start" });
}

/* One result: the full result while it is retained, else the example kept with the window. */
async function showResult(example) {
  const r = await SE.api("GET", `/api/v1/results/${q(example.id)}?model=${q(state.examples.model)}&suite=${q(state.examples.suite)}`);
  const full = r.ok && !r.payload.data.example ? r.payload.data : null;  /* example: the window's copy */
  const doc = full || example;
  $("result-detail").hidden = false;
  $("detail-title").textContent = `Result ${doc.id}`;
  const gates = (doc.failed_gates || []).length ? ` · failed gates: ${doc.failed_gates.join(", ")}` : "";
  $("detail-summary").textContent = `score ${doc.score.toFixed(3)} · grade ${doc.grade} · ${doc.passed ? "passed" : "failed"} (threshold ${doc.threshold})`
    + `${gates}${doc.reason ? ` · ${doc.reason}` : ""} · event time ${doc.event_time}${doc.category ? ` · category ${doc.category}` : ""}`;
  $("detail-evaluators").querySelector("tbody").replaceChildren(...(doc.evaluators || []).map((e) => SE.el("tr", {},
    cell(e.name, "wrap"), cell(e.score.toFixed(3)), cell(e.passed ? "yes" : "no", e.passed ? "pass" : "fail"), cell(e.weight),
    cell(e.error ? `error: ${e.error}` : e.reason || "", "wrap"))));
  const judges = doc.judge ? doc.judge.judges : [];
  $("detail-judges").hidden = !judges.length;
  $("detail-judges").querySelector("tbody").replaceChildren(...judges.map((j) => SE.el("tr", {},
    cell(j.name, "wrap"), cell(j.model, "wrap"), cell(j.status), cell(fixed(j.score, 1)), cell(j.reasoning || j.error || j.reason || "", "wrap"))));
  /* the results API answers the window's example once the broker has the result; an error says why */
  const why = r.ok ? "" : `: ${r.payload && r.payload.message ? r.payload.message : `HTTP ${r.status}`}`;
  $("detail-source").textContent = full
    ? "the full result (kept until the broker has it, within the redelivery horizon)"
    : `the example kept with the window (texts may be shortened)${why}`;
  $("result-detail").scrollIntoView({ block: "nearest" });
}

function bindFilters() {
  const rerun = () => refresh();
  $("filter-model").addEventListener("change", (e) => { state.model = e.target.value; rerun(); });
  $("filter-suite").addEventListener("change", (e) => { state.suite = e.target.value; rerun(); });
  $("filter-size").addEventListener("change", (e) => { state.size = Number(e.target.value); rerun(); });
  $("filter-version").addEventListener("change", (e) => { state.version = e.target.value; rerun(); });
  $("compare-run").addEventListener("click", compareVersions);
  $("filter-range").addEventListener("change", (e) => { state.range = e.target.value; rerun(); });
  $("examples-close").addEventListener("click", () => { $("examples-panel").hidden = true; state.examples = null; });
  for (const b of $("examples-kind").querySelectorAll("button")) {
    b.addEventListener("click", () => {
      const x = state.examples;
      if (x) openExamples(x.model, x.suite, x.size, x.start, b.dataset.kind, x.highlight, x.version);
    });
  }
}

SE.header("dashboard");
bindFilters();
const linked = fromLink();
refresh();
setInterval(refresh, 2000);
if (linked !== null) openExamples(state.model, state.suite, state.size, linked, "worst");

/* Versions of the chosen model × suite (docs/versions.md) for the version filter and the compare view. */
async function listVersions() {
  const r = await SE.api("GET", "/api/v1/stats/pairs?limit=500&version=all");
  if (!r.ok) return;
  const mine = r.payload.data.filter(wanted);
  const versions = [...new Set(mine.map((p) => p.version || "legacy"))].sort();
  const current = mine.filter((p) => p.current).map((p) => p.version);
  const label = (v) => (current.includes(v) ? `${v} (current)` : v);
  const select = $("filter-version");
  const have = [...select.options].map((o) => o.value).slice(2);
  if (have.join(",") !== versions.join(",")) {
    const chosen = select.value;
    select.replaceChildren(SE.el("option", { value: "" }, "current"), SE.el("option", { value: "all" }, "all versions"),
      ...versions.map((v) => SE.el("option", { value: v }, label(v))));
    select.value = ["", "all", ...versions].includes(chosen) ? chosen : "";
    for (const [id, pick] of [["compare-a", 0], ["compare-b", versions.length - 1]]) {
      const keep = $(id).value;
      $(id).replaceChildren(...versions.map((v) => SE.el("option", { value: v }, label(v))));
      $(id).value = versions.includes(keep) ? keep : versions[Math.max(0, pick)] || "";
    }
  }
}

async function compareVersions() {
  const note = $("compare-note");
  if (!state.model || !state.suite) { note.textContent = "pick one model and one suite first"; return; }
  const a = $("compare-a").value, b = $("compare-b").value;
  const r = await SE.api("GET", `/api/v1/stats/compare?model=${q(state.model)}&suite=${q(state.suite)}&a=${q(a)}&b=${q(b)}`);
  if (!r.ok) { note.textContent = SE.errorText(r); $("compare-table").hidden = true; return; }
  const d = r.payload.data;
  note.textContent = d.empty ? `empty comparison: ${d.reason}` : `${d.n} events scored by both (${d.n_a} by a, ${d.n_b} by b)`;
  $("compare-table").hidden = d.empty;
  $("compare-table").querySelector("tbody").replaceChildren(SE.el("tr", {},
    cell(d.n), cell(`${fixed(d.mean_a, 3)} → ${fixed(d.mean_b, 3)}`),
    cell(`${fixed(d.mean_diff, 4)} [${fixed(d.ci_low, 4)}, ${fixed(d.ci_high, 4)}]`), cell(d.pass_to_fail), cell(d.fail_to_pass),
    cell(fixed(d.kappa, 3)), cell(fixed(d.pearson, 3)), cell(fixed(d.spearman, 3))));
  const lines = [];
  for (const [kind, ids] of [["pass→fail", d.pass_to_fail_ids], ["fail→pass", d.fail_to_pass_ids]]) {
    if (ids && ids.length) lines.push(SE.el("li", {}, `${kind}: ${ids.join(", ")}`));
  }
  for (const [name, e] of Object.entries(d.evaluators || {})) {
    lines.push(SE.el("li", {}, e.n ? `${name}: ${fixed(e.mean_a, 3)} → ${fixed(e.mean_b, 3)} (${fixed(e.mean_diff, 4)}, n ${e.n})` : `${name}: only in ${e.only_in}`));
  }
  $("compare-details").replaceChildren(...lines);
}
