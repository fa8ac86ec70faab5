/* The dashboard's usage panels (docs/usage.md): quality per cost, the models of the suite chosen above side by
   side (GET /api/v1/stats/compare/models, per value of a slice dimension on request), and the spend budgets
   with their period's spend so far (GET /api/v1/stats/budgets). Reads the dashboard's filters from the page. */
"use strict";
(() => {
  const $ = (id) => document.getElementById(id);
  const q = encodeURIComponent;
  const num = (v, digits = 3) => (v === null || v === undefined ? "—" : Number(v).toFixed(digits));
  const pct = (v) => (v === null || v === undefined ? "—" : `${(100 * v).toFixed(1)} %`);
  const td = (text, cls) => SE.el("td", { class: cls, title: String(text) }, String(text));

  async function refreshCosts() {
    const suite = $("filter-suite").value, note = $("costs-note"), table = $("costs-table");
    if (!suite) { note.textContent = "pick a suite"; table.hidden = true; return; }
    let args = `suite=${q(suite)}`;
    const size = $("filter-size").value, dimension = $("costs-dimension").value.trim();
    if (size) args += `&size=${q(size)}`;
    if (dimension) args += `&dimension=${q(dimension)}`;
    const r = await SE.api("GET", `/api/v1/stats/compare/models?${args}`);
    if (!r.ok) { note.textContent = SE.errorText(r); table.hidden = true; return; }
    const rows = r.payload.data.rows;
    rows.sort((a, b) => (a.value || "").localeCompare(b.value || "") || (a.cost_per_1000 ?? Infinity) - (b.cost_per_1000 ?? Infinity));
    note.textContent = rows.length ? `${r.payload.data.windows.length} window(s) of ${r.payload.data.size} s` : "no events in these windows";
    table.hidden = rows.length === 0;
    table.querySelector("tbody").replaceChildren(...rows.map((row) => SE.el("tr", { "data-model": row.model },
      td(row.model), td(row.value ?? "—"), td(row.count, "num"), td(pct(row.pass_rate), "num"), td(num(row.mean), "num"),
      td(row.cost_per_1000 === null ? "unpriced" : `${num(row.cost_per_1000, 4)} ${row.currency ?? ""}`, "num"),
      td(row.unpriced, "num"))));
  }

  async function refreshBudgets() {
    const note = $("budgets-note"), table = $("budgets-table");
    const r = await SE.api("GET", "/api/v1/stats/budgets");
    if (!r.ok) { note.textContent = SE.errorText(r); table.hidden = true; return; }
    const rows = r.payload.data.budgets;
    note.textContent = rows.length ? "" : "no budgets checked (the suite file has no budgets:)";
    table.hidden = rows.length === 0;
    table.querySelector("tbody").replaceChildren(...rows.map((b) => SE.el("tr", { "data-budget": b.name },
      td(b.name), td(Object.entries(b.scope).map(([k, v]) => `${k} ${typeof v === "object" ? `${v.dimension}=${v.value}` : v}`).join(", ")),
      td(`${b.period} ${b.period_id} (${b.time_zone})`), td(`${num(b.spend, 2)} ${b.currency}`, "num"),
      td(`${num(b.limit, 2)} ${b.currency}`, "num"), td(pct(b.share), b.share >= 1 ? "num bad" : "num"))));
  }

  for (const id of ["filter-suite", "filter-size", "costs-dimension"]) $(id).addEventListener("change", refreshCosts);
  refreshCosts();
  refreshBudgets();
  setInterval(refreshCosts, 5000);
  setInterval(refreshBudgets, 5000);
})();
