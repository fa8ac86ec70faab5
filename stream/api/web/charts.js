/* Hand-written SVG charts for the dashboard: a multi-series line chart and a bar chart. */
"use strict";
const Charts = (() => {
  const NS = "http://www.w3.org/2000/svg";
  const COLORS = ["#2f6fed", "#e8590c", "#2b8a3e", "#ae3ec9", "#c92a2a", "#1098ad", "#5c940d", "#862e9c"];
  const svg = (tag, attrs) => { const n = document.createElementNS(NS, tag); for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v); return n; };
  const label = (x, y, text, anchor = "end") => { const t = svg("text", { x, y, "text-anchor": anchor }); t.textContent = text; return t; };
  const pad2 = (n) => String(n).padStart(2, "0");

  /* A time label that fits the span shown: seconds for short spans, the date when it covers days. */
  function clock(s, span) {
    const d = new Date(s * 1000);
    const hm = `${pad2(d.getHours())}:${pad2(d.getMinutes())}`;
    if (span >= 86400) return `${pad2(d.getMonth() + 1)}-${pad2(d.getDate())} ${hm}`;
    return span >= 600 ? hm : `${hm}:${pad2(d.getSeconds())}`;
  }

  /* Evenly spaced time ticks on whole steps (1 s .. 1 day) between x0 and x1, at most `most` of them. */
  function timeTicks(x0, x1, most = 7) {
    if (x1 <= x0) return [x0];
    const steps = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];
    const step = steps.find((s) => (x1 - x0) / s <= most - 1) || Math.ceil((x1 - x0) / (most - 1) / 86400) * 86400;
    const out = [];
    for (let t = Math.ceil(x0 / step) * step; t <= x1; t += step) out.push(t);
    return out;
  }

  /* series: [{name, points: [{x, y, ...}], color?, others?}]; x are window starts (epoch s); an `others`
     series (many pairs folded into one line) takes no clicks.
     Options: yMin, yMax (null: from the data), format(y) for the y labels, onPoint(series, point) on a click. */
  function line(target, series, { yMin = 0, yMax = 1, width = 1100, height = 220, percent = false, format = null, onPoint = null } = {}) {
    const pad = { l: 52, r: 16, t: 10, b: 26 };
    const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, width: "100%", role: "img" });
    const ys = series.flatMap((s) => s.points.map((p) => p.y)).filter((y) => y !== null && y !== undefined);
    if (yMax === null) yMax = Math.max(...ys, 0) * 1.1 || 1;
    const xs = [...new Set(series.flatMap((s) => s.points.map((p) => p.x)))].sort((a, b) => a - b);
    const x0 = xs[0] ?? 0, x1 = xs[xs.length - 1] ?? 1;
    const px = (x) => pad.l + (x1 === x0 ? (width - pad.l - pad.r) / 2 : ((x - x0) / (x1 - x0)) * (width - pad.l - pad.r));
    const py = (y) => height - pad.b - ((y - yMin) / (yMax - yMin)) * (height - pad.t - pad.b);
    const yText = format || ((y) => (percent ? `${Math.round(y * 100)}%` : y.toFixed(2)));
    for (const tick of [0, 0.25, 0.5, 0.75, 1]) {
      const y = yMin + tick * (yMax - yMin);
      root.append(svg("line", { x1: pad.l, x2: width - pad.r, y1: py(y), y2: py(y), stroke: "#eceff3" }));
      root.append(label(pad.l - 6, py(y) + 4, yText(y)));
    }
    if (xs.length) {
      const ticks = x1 === x0 ? [x0] : timeTicks(x0, x1, Math.max(3, Math.floor(width / 140)));
      for (const t of ticks) {
        root.append(svg("line", { x1: px(t), x2: px(t), y1: height - pad.b, y2: height - pad.b + 4, stroke: "#98a2b3", class: "x-tick" }));
        // labels near an edge are anchored inside the chart, not cut off
        const anchor = px(t) < pad.l + 30 ? "start" : px(t) > width - pad.r - 30 ? "end" : "middle";
        root.append(label(px(t), height - 8, clock(t, x1 - x0), anchor));
      }
    }
    series.forEach((s, i) => {
      const pts = s.points.filter((p) => p.y !== null && p.y !== undefined);
      const color = s.color || COLORS[i % COLORS.length];
      if (pts.length > 1) root.append(svg("polyline", { points: pts.map((p) => `${px(p.x)},${py(p.y)}`).join(" "), fill: "none", stroke: color, "stroke-width": 2 }));
      const click = onPoint && !s.others;  // a line folding many pairs has no one window to open
      for (const p of pts) {
        const dot = svg("circle", { cx: px(p.x), cy: py(p.y), r: click ? 4 : 3, fill: color, "data-series": s.name, "data-start": p.x, class: click ? "point" : "" });
        const title = svg("title", {});
        title.textContent = `${s.name} · ${new Date(p.x * 1000).toLocaleString()} · ${yText(p.y)}${click ? " · click for examples" : ""}`;
        dot.append(title);
        if (click) dot.addEventListener("click", () => onPoint(s, p));
        root.append(dot);
      }
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
  return { line, bars, timeTicks, COLORS };
})();
