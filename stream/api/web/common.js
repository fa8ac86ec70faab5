/* Shared helpers of the streameval pages: API calls in the {code, data} envelope, the token, DOM. */
"use strict";
const SE = {
  TOKEN_KEY: "streameval.apiToken",
  // the token lives for this tab's session only (sessionStorage), never in localStorage
  token() { return sessionStorage.getItem(SE.TOKEN_KEY) || ""; },
  async api(method, path, body) {
    const headers = { Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (SE.token()) headers.Authorization = "Bearer " + SE.token();
    const resp = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    let payload = null;
    try { payload = await resp.json(); } catch (e) { payload = null; }
    return { status: resp.status, ok: resp.ok, payload };
  },
  el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else if (value !== undefined && value !== null && value !== false) node.setAttribute(key, value === true ? "" : value);
    }
    for (const child of children.flat()) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    return node;
  },
  errorText(result) {
    const p = result.payload;
    return p && p.message ? `${p.message} (code ${p.code})` : `HTTP ${result.status}`;
  },
  header(active) {
    const input = SE.el("input", { id: "api-token", type: "password", placeholder: "STREAMEVAL_API_TOKEN", size: 22, value: SE.token() });
    input.addEventListener("change", () => sessionStorage.setItem(SE.TOKEN_KEY, input.value.trim()));
    localStorage.removeItem(SE.TOKEN_KEY);  // left by older versions
    const link = (href, text, key) => SE.el("a", { href, class: active === key ? "active" : null }, SE.icon(key), text);
    document.body.prepend(SE.el("header", {},
      SE.el("span", { class: "brand" }, SE.icon("brand"), "streameval"),
      SE.el("nav", {}, link("/evaluators", "评估器 Evaluators", "evaluators"), link("/dashboard", "仪表盘 Dashboard", "dashboard")),
      SE.el("label", { class: "token" }, "API token", input)));
  },
  /* An icon drawn as inline SVG (no emoji: servers and CI machines often have no emoji font). */
  ICONS: {
    brand: [["rect", { x: 2, y: 2, width: 20, height: 20, rx: 5, fill: "currentColor", stroke: "none" }],
      ["polyline", { points: "6,16 10,11 13.5,14 18,8", stroke: "#fff" }]],
    evaluators: [["path", { d: "M9 6h11M9 12h11M9 18h11" }], ["path", { d: "M3.5 6l1.5 1.5L7.5 4.5M3.5 12l1.5 1.5 2.5-3M3.5 18l1.5 1.5 2.5-3" }]],
    dashboard: [["path", { d: "M3 20h18" }], ["path", { d: "M6 16v-5M11 16V6M16 16v-8M20 16v-3" }]],
  },
  icon(name) {
    const NS = "http://www.w3.org/2000/svg";
    const root = document.createElementNS(NS, "svg");
    const attrs = { viewBox: "0 0 24 24", width: 16, height: 16, class: "icon", "aria-hidden": "true", fill: "none",
      stroke: "currentColor", "stroke-width": 2, "stroke-linecap": "round", "stroke-linejoin": "round", "data-icon": name };
    for (const [k, v] of Object.entries(attrs)) root.setAttribute(k, v);
    for (const [tag, shape] of SE.ICONS[name] || []) {
      const node = document.createElementNS(NS, tag);
      for (const [k, v] of Object.entries(shape)) node.setAttribute(k, v);
      root.append(node);
    }
    return root;
  },
  // a colour swatch set through the CSSOM: the Content-Security-Policy allows no style attributes
  swatch(color) { const node = SE.el("i", {}); node.style.background = color; return node; },
  time(iso) { return iso ? new Date(iso).toLocaleString() : ""; },
};
