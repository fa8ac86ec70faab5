/* /dashboard: live figures read every 2 s from /api/v1/stats/* and /api/v1/alerts. */
"use strict";
const $ = (id) => document.getElementById(id);
const pct = (v) => (v === null || v === undefined ? "—" : `${(v * 100).toFixed(1)}%`);
const GRADE_ORDER = ["excellent", "good", "pass", "fail", "severe_defect", "A+", "A", "A-", "B+", "B", "B-", "C+", "C", "C-", "D", "F"];

async function refresh() {
  const [pairs, windows, dead, alerts] = await Promise.all([
    SE.api("GET", "/api/v1/stats/pairs"), SE.api("GET", "/api/v1/stats/windows?last=30"),
    SE.api("GET", "/api/v1/stats/deadletters?last=30"), SE.api("GET", "/api/v1/alerts?limit=20"),
  ]);
  const failed = [pairs, windows, dead, alerts].find((r) => !r.ok);
  if (failed) { $("message").className = "message error"; $("message").textContent = SE.errorText(failed); return; }
  $("message").textContent = "";
  const all = pairs.payload.data;
  const total = all.reduce((n, p) => n + p.count, 0);
  const sum = all.reduce((n, p) => n + (p.mean || 0) * p.count, 0);
  const passes = all.reduce((n, p) => n + (p.passRate || 0) * p.count, 0);
  const deadTotal = Object.values(dead.payload.data.total).reduce((a, b) => a + b, 0);
  $("total-events").textContent = String(total);
  $("mean-score").textContent = total ? (sum / total).toFixed(3) : "—";
  $("pass-rate").textContent = total ? pct(passes / total) : "—";
  $("dead-letters").textContent = `${deadTotal} (${pct(total + deadTotal ? deadTotal / (total + deadTotal) : null)})`;

  const w = windows.payload.data;
  $("window-size").textContent = `· ${w.size}-second windows`;
  const series = w.series.map((s) => ({ name: `${s.model} × ${s.suite}`, points: s.points.map((p) => ({ x: p.start, y: p.mean })) }));
  const colors = Charts.line($("score-chart"), series);
  $("score-legend").replaceChildren(...series.map((s, i) => SE.el("span", {}, SE.swatch(colors[i % colors.length]), s.name)));
  Charts.line($("pass-chart"), w.series.map((s) => ({ name: s.model, points: s.points.map((p) => ({ x: p.start, y: p.passRate })) })), { width: 540, height: 200, percent: true });

  // dead-letter rate per window: dead letters / (results + dead letters) of that window
  const results = new Map();
  for (const s of w.series) for (const p of s.points) results.set(p.start, (results.get(p.start) || 0) + p.count);
  const deadPoints = dead.payload.data.points.map((p) => {
    const n = Object.values(p.kinds).reduce((a, b) => a + b, 0);
    return { x: p.start, y: n / (n + (results.get(p.start) || 0)) };
  });
  const starts = new Set(deadPoints.map((p) => p.x));
  for (const [start] of results) if (!starts.has(start)) deadPoints.push({ x: start, y: 0 });
  deadPoints.sort((a, b) => a.x - b.x);
  Charts.line($("deadletter-chart"), [{ name: "dead letters", points: deadPoints }], { width: 540, height: 200, percent: true });

  const grades = {};
  for (const p of all) for (const [g, n] of Object.entries(p.grades)) grades[g] = (grades[g] || 0) + n;
  const gradeItems = Object.entries(grades).sort(([a], [b]) => GRADE_ORDER.indexOf(a) - GRADE_ORDER.indexOf(b)).map(([name, value]) => ({ name, value }));
  Charts.bars($("grade-chart"), gradeItems);

  const list = alerts.payload.data;
  $("no-alerts").hidden = list.length > 0;
  // alert v1 (schemas/alert.v1.json): rule, severity, model, suite, message, fired_at
  $("alerts").replaceChildren(...list.map((a) => SE.el("li", { class: `alert ${a.severity || ""}` },
    SE.el("span", { class: "badge" }, a.severity || "alert"), " ", SE.time(a.fired_at), " ",
    SE.el("b", {}, a.rule || "?"), ` · ${a.model || ""} × ${a.suite || ""}: ${a.message || ""}`)));

  $("pairs-table").querySelector("tbody").replaceChildren(...all.map((p) => SE.el("tr", {},
    SE.el("td", {}, p.model), SE.el("td", {}, p.suite), SE.el("td", {}, String(p.count)),
    SE.el("td", {}, p.mean === null ? "—" : p.mean.toFixed(3)), SE.el("td", {}, pct(p.passRate)),
    SE.el("td", {}, String(Object.values(p.evaluators).reduce((n, e) => n + e.errors, 0))))));
  const fixed = (v, d) => (v === null || v === undefined ? "—" : v.toFixed(d));
  const judgeRows = [];
  for (const p of all) {
    const means = Object.values(p.judges).map((j) => j.mean).filter((m) => m !== null);
    const spread = means.length > 1 ? Math.max(...means) - Math.min(...means) : null;
    for (const [name, j] of Object.entries(p.judges)) {
      judgeRows.push(SE.el("tr", {}, SE.el("td", {}, p.model), SE.el("td", {}, p.suite), SE.el("td", {}, name),
        SE.el("td", {}, String(j.n)), SE.el("td", {}, fixed(j.mean, 2)), SE.el("td", {}, fixed(j.sd, 2)),
        SE.el("td", {}, String(j.calls)), SE.el("td", {}, String(j.errors)), SE.el("td", {}, String(j.cacheHits)),
        SE.el("td", {}, fixed(spread, 2))));
    }
  }
  $("judges-table").querySelector("tbody").replaceChildren(...judgeRows);
  $("no-judges").hidden = judgeRows.length > 0;
  $("updated").textContent = new Date().toLocaleTimeString();
}

SE.header("dashboard");
refresh();
setInterval(refresh, 2000);
