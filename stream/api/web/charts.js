/* Hand-written SVG charts for the dashboard: a multi-series line chart and a bar chart. */
"use strict";
const Charts = (() => {
  const NS = "http://www.w3.org/2000/svg";
  const COLORS = ["#2f6fed", "#e8590c", "#2b8a3e", "#ae3ec9", "#c92a2a", "#1098ad", "#5c940d", "#862e9c"];
  const svg = (tag, attrs) => { const n = document.createElementNS(NS, tag); for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v); return n; };
  const label = (x, y, text, anchor = "end") => { const t = svg("text", { x, y, "text-anchor": anchor }); t.textContent = text; return t; };
  const clock = (s) => new Date(s * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });

  /* series: [{name, points: [{x, y}]}], y in [yMin, yMax]; x are window starts (epoch s). */
  function line(target, series, { yMin = 0, yMax = 1, width = 1100, height = 220, percent = false } = {}) {
    const pad = { l: 44, r: 12, t: 10, b: 24 };
    const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, width: "100%", role: "img" });
    const xs = [...new Set(series.flatMap((s) => s.points.map((p) => p.x)))].sort((a, b) => a - b);
    const x0 = xs[0] ?? 0, x1 = xs[xs.length - 1] ?? 1;
    const px = (x) => pad.l + (x1 === x0 ? (width - pad.l - pad.r) / 2 : ((x - x0) / (x1 - x0)) * (width - pad.l - pad.r));
    const py = (y) => height - pad.b - ((y - yMin) / (yMax - yMin)) * (height - pad.t - pad.b);
    for (const tick of [0, 0.25, 0.5, 0.75, 1]) {
      const y = yMin + tick * (yMax - yMin);
      root.append(svg("line", { x1: pad.l, x2: width - pad.r, y1: py(y), y2: py(y), stroke: "#eceff3" }));
      root.append(label(pad.l - 6, py(y) + 4, percent ? `${Math.round(y * 100)}%` : y.toFixed(2)));
    }
    if (xs.length) { root.append(label(pad.l, height - 6, clock(x0), "start")); root.append(label(width - pad.r, height - 6, clock(x1))); }
    series.forEach((s, i) => {
      const pts = s.points.filter((p) => p.y !== null && p.y !== undefined);
      const color = COLORS[i % COLORS.length];
      if (pts.length > 1) root.append(svg("polyline", { points: pts.map((p) => `${px(p.x)},${py(p.y)}`).join(" "), fill: "none", stroke: color, "stroke-width": 2 }));
      for (const p of pts) root.append(svg("circle", { cx: px(p.x), cy: py(p.y), r: 3, fill: color, "data-series": s.name }));
    });
    if (!xs.length) root.append(label(width / 2, height / 2, "no data yet", "middle"));
    target.replaceChildren(root);
    return COLORS;
  }

  /* bars: [{name, value}] */
  function bars(target, items, { width = 540, height = 200, percent = false } = {}) {
    const pad = { l: 10, r: 10, t: 16, b: 24 };
    const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, width: "100%", role: "img" });
    const max = Math.max(...items.map((i) => i.value), percent ? 0.0001 : 1);
    const slot = (width - pad.l - pad.r) / Math.max(items.length, 1);
    items.forEach((item, i) => {
      const h = (item.value / max) * (height - pad.t - pad.b);
      const x = pad.l + i * slot + slot * 0.15;
      root.append(svg("rect", { x, y: height - pad.b - h, width: slot * 0.7, height: h, fill: COLORS[0], "data-name": item.name, "data-value": item.value }));
      root.append(label(x + slot * 0.35, height - 8, item.name, "middle"));
      root.append(label(x + slot * 0.35, height - pad.b - h - 4, percent ? `${(item.value * 100).toFixed(1)}%` : String(item.value), "middle"));
    });
    if (!items.length) root.append(label(width / 2, height / 2, "no data yet", "middle"));
    target.replaceChildren(root);
  }
  return { line, bars, COLORS };
})();
