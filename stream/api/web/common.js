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
    const link = (href, text, key) => SE.el("a", { href, class: active === key ? "active" : null }, text);
    document.body.prepend(SE.el("header", {},
      SE.el("span", { class: "brand" }, "streameval"),
      SE.el("nav", {}, link("/evaluators", "评估器 Evaluators", "evaluators"), link("/dashboard", "仪表盘 Dashboard", "dashboard")),
      SE.el("label", { class: "token" }, "API token", input)));
  },
  // a colour swatch set through the CSSOM: the Content-Security-Policy allows no style attributes
  swatch(color) { const node = SE.el("i", {}); node.style.background = color; return node; },
  time(iso) { return iso ? new Date(iso).toLocaleString() : ""; },
};
