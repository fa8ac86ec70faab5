/* The dashboard's slices (segments:, docs/segments.md): a slice selector and the worst-slices table of the
   model × suite chosen above, from GET /api/v1/stats/segments. Reads the dashboard's filters from the page. */
"use strict";
(() => {
  const $ = (id) => document.getElementById(id);
  const q = encodeURIComponent;
  const num = (v, digits = 3) => (v === null || v === undefined ? "—" : Number(v).toFixed(digits));
  const pct = (v) => (v === null || v === undefined ? "—" : `${(100 * v).toFixed(1)} %`);
  const ci = (low, high, f) => (low === null || low === undefined ? "—" : `[${f(low)}, ${f(high)}]`);
  const td = (text, cls) => SE.el("td", { class: cls, title: String(text) }, String(text));

  /* Keep a <select>'s options in step with `values` without losing the choice. */
  function choices(select, values, allLabel) {
    const want = ["", ...values];
    if ([...select.options].map((o) => o.value).join("\u0000") !== want.join("\u0000")) {
      const current = select.value;
      select.replaceChildren(...want.map((v) => SE.el("option", { value: v }, v === "" ? allLabel : v)));
      select.value = want.includes(current) ? current : "";
    }
  }

  async function refreshSlices() {
    const model = $("filter-model").value, suite = $("filter-suite").value;
    const note = $("segments-note"), table = $("segments-table"), series = $("segment-series");
    if (!model || !suite) {
      note.textContent = "pick a model and a suite";
      table.hidden = series.hidden = true;
      return;
    }
    const dimension = $("segment-dimension").value, value = $("segment-value").value;
    const version = $("filter-version").value, size = $("filter-size").value;
    let args = `model=${q(model)}&suite=${q(suite)}`;
    if (size) args += `&size=${q(size)}`;
    if (version && version !== "all") args += `&version=${q(version)}`;
    // every dimension for the selector, then the chosen slice
    const all = await SE.api("GET", `/api/v1/stats/segments?${args}`);
    if (!all.ok) { note.textContent = SE.errorText(all); table.hidden = series.hidden = true; return; }
    const dims = all.payload.data.dimensions;
    choices($("segment-dimension"), dims.map((d) => d.name), "all dimensions");
    const chosen = dims.find((d) => d.name === $("segment-dimension").value);
    choices($("segment-value"), chosen ? chosen.values.map((v) => v.value).sort() : [], "every value");
    let data = all.payload.data;
    if ($("segment-dimension").value) {
      const one = $("segment-value").value;
      const r = await SE.api("GET", `/api/v1/stats/segments?${args}&dimension=${q($("segment-dimension").value)}${one ? `&value=${q(one)}` : ""}`);
      if (!r.ok) { note.textContent = SE.errorText(r); return; }
      data = r.payload.data;
    }
    const overall = data.overall;
    const rows = data.dimensions.flatMap((d) => d.values.map((v) => ({ dimension: d.name, ...v })));
    rows.sort((a, b) => (b.below ?? -2) - (a.below ?? -2) || a.dimension.localeCompare(b.dimension) || a.value.localeCompare(b.value));
    const others = data.dimensions.filter((d) => d.other > 0).map((d) => `${d.name}: ${d.other} events beyond its kept values, under (other)`);
    note.textContent = dims.length === 0
      ? "no slices kept for this model × suite (the suite file has no segments:)"
      : `pair: ${overall.count} events, mean ${num(overall.mean)} over ${data.windows.length} window(s)` + (others.length ? ` · ${others.join(" · ")}` : "");
    table.hidden = rows.length === 0;
    table.querySelector("tbody").replaceChildren(...rows.map((r) => SE.el("tr", { "data-dimension": r.dimension, "data-value": r.value },
      td(r.dimension), td(r.value), td(r.count, "num"), td(num(r.mean), "num"), td(ci(r.ci_low, r.ci_high, num)),
      td(pct(r.pass_rate), "num"), td(ci(r.pass_ci_low, r.pass_ci_high, pct)), td(r.below === null ? "—" : num(r.below), "num"))));
    series.hidden = !data.series;
    if (data.series) {
      series.querySelector("tbody").replaceChildren(...data.series.map((w) => SE.el("tr", {},
        td(new Date(w.start * 1000).toLocaleString()), td(w.count, "num"), td(num(w.mean), "num"), td(ci(w.ci_low, w.ci_high, num)), td(pct(w.pass_rate), "num"))));
    }
  }

  for (const id of ["filter-model", "filter-suite", "filter-size", "filter-version", "segment-value"]) {
    $(id).addEventListener("change", refreshSlices);
  }
  $("segment-dimension").addEventListener("change", () => { $("segment-value").value = ""; refreshSlices(); });
  refreshSlices();
  setInterval(refreshSlices, 5000);
})();
