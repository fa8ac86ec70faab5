/* The review page: the shared queue of review items, one open (reserved) at a time, labelled with the keyboard.
   Every text of an item (input, output, reasons, judges' reasoning) is set with textContent, never as markup. */
"use strict";
const $ = (id) => document.getElementById(id);
const API = "/api/v1/review";
const state = { items: [], current: null, doc: null, scale: "1-5", renew: null, lastDigit: null, busy: false, moving: false };

function say(text, kind) { const m = $("message"); m.textContent = text || ""; m.className = "message" + (kind ? " " + kind : ""); }
function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
function badge(reason) { return SE.el("span", { class: "badge reason-" + reason }, reason); }
function num(v, digits) { return v === null || v === undefined ? "—" : Number(v).toFixed(digits === undefined ? 3 : digits); }
const SCALES = { "0-1": [0, 1], "1-5": [1, 5], "0-10": [0, 10], "0-100": [0, 100] };

function filters() {
  const q = new URLSearchParams();
  for (const name of ["model", "suite", "reason", "order"]) { const v = $("filter-" + name).value; if (v) q.set(name, v); }
  return q.toString();
}

function fillSelect(select, values) {
  const chosen = select.value;
  const keep = select.options[0];
  clear(select); select.append(keep);
  for (const v of values) select.append(SE.el("option", { value: v }, v));
  select.value = values.includes(chosen) ? chosen : "";
}

async function refresh(withProgress = true) {
  if (!SE.token()) { say("Type your token in the header (a name in STREAMEVAL_REVIEW_TOKENS_FILE, or the API token): the queue is shown to named people only.", "error"); return false; }
  const r = await SE.api("GET", `${API}/items?${filters()}`);
  if (!r.ok) { say(SE.errorText(r), "error"); return false; }
  const data = r.payload.data;
  $("annotator").textContent = data.annotator;
  fillSelect($("filter-model"), data.models);
  fillSelect($("filter-suite"), data.suites);
  fillSelect($("filter-reason"), data.reasons);
  state.items = data.items;
  renderQueue(data.open, data.held_by_others);
  if (withProgress) await progress();
  return true;
}

function renderQueue(open, heldByOthers) {
  const list = $("queue");
  clear(list);
  for (const item of state.items) {
    const li = SE.el("li", { "data-key": item.key, tabindex: "-1", class: [item.key === state.current ? "current" : "", item.open || item.mine ? "" : "closed"].join(" ").trim() || null },
      SE.el("div", {}, ...item.reasons.map(badge), " ", SE.el("span", { class: "muted" }, `${item.model} × ${item.suite}`)),
      SE.el("div", {}, SE.el("b", {}, item.id), ` · score ${num(item.score)} · ${item.passed ? "passed" : "failed"}`,
        item.reserved && !item.mine ? SE.el("span", { class: "muted" }, " · open by someone") : "",
        ` · ${item.labels}/${item.reviewers}`),
      SE.el("span", { class: "preview" }, item.preview || ""));
    li.addEventListener("click", () => openItem(item.key));
    list.append(li);
  }
  // the items held by others are listed, but counted apart: they are not the caller's to label now
  $("queue-count").textContent = `${open} to label` + (heldByOthers ? ` · ${heldByOthers} open by someone else` : "");
  $("queue-empty").hidden = state.items.length > 0;
}

async function progress() {
  const r = await SE.api("GET", `${API}/progress`);
  if (!r.ok) return;
  const data = r.payload.data;
  const qt = $("progress-queues").tBodies[0]; clear(qt);
  for (const q of data.queues) qt.append(SE.el("tr", {}, ...[q.model, q.suite, q.items, q.complete, q.labels, q.open].map((v) => SE.el("td", {}, v))));
  const at = $("progress-annotators").tBodies[0]; clear(at);
  for (const a of data.annotators) at.append(SE.el("tr", { "data-annotator": a.annotator }, ...[a.annotator, a.labelled, a.skipped, a.holding].map((v) => SE.el("td", {}, v))));
  const me = data.annotators.find((a) => a.annotator === data.annotator) || { labelled: 0, skipped: 0 };
  const all = data.queues.reduce((n, q) => n + q.items, 0);
  $("my-progress").textContent = `you labelled ${me.labelled}, skipped ${me.skipped} of ${all} kept items`;
}

function stopRenew() { if (state.renew) { clearInterval(state.renew); state.renew = null; } }

/* Reserve with ?try=true: an item someone else took meanwhile is an answer (reserved: false), not an HTTP
   error, so races between people leave the console clean. */
async function reserve(key) {
  const r = await SE.api("POST", `${API}/items/${encodeURIComponent(key)}/reserve?try=true`);
  if (!r.ok) return { ok: false, text: SE.errorText(r) };
  const data = r.payload.data;
  return data.reserved ? { ok: true, data } : { ok: false, text: data.why };
}

async function openItem(key) {
  if (state.busy) return false;
  state.busy = true;
  let first = false;  // the person held nothing: their "holding" changes
  try {
    const r = await reserve(key);
    if (!r.ok) { say(r.text, "error"); return false; }
    const data = r.data;
    first = state.current === null;
    state.current = key; state.doc = data.item;
    if (document.activeElement && $("item").contains(document.activeElement)) document.activeElement.blur();
    renderItem(data.item, data.lease_until);
    stopRenew();
    const lease = Math.max(5000, (new Date(data.lease_until) - Date.now()) / 3);
    state.renew = setInterval(async () => {  // keep it reserved while it is open
      const again = await reserve(key);
      if (again.ok) $("item-lease").textContent = "reserved for you until " + SE.time(again.data.lease_until);
      else { stopRenew(); say("lost the reservation: " + again.text, "error"); }
    }, Math.min(lease, 60000));
    for (const li of $("queue").children) li.classList.toggle("current", li.dataset.key === key);
    say("");
  } finally { state.busy = false; }
  if (first) await progress();  // the person's own figures at once, not at the next periodic refresh
  return true;
}

function textBlock(node, value) { node.textContent = value === null || value === undefined || value === "" ? "—" : String(value); }

function renderItem(doc, leaseUntil) {
  const item = doc.item, result = doc.result, event = doc.event || {};
  $("item-none").hidden = true; $("item").hidden = false;
  $("item-title").textContent = `${item.id} · ${item.model} × ${item.suite}`;
  $("item-lease").textContent = "reserved for you until " + SE.time(leaseUntil);
  const why = $("item-why"); clear(why);
  why.append(...item.reasons.map(badge), " ", SE.el("span", {}, item.reason));
  $("item-summary").textContent = `score ${num(result.score)} (threshold ${num(result.threshold, 2)}) · ${result.passed ? "passed" : "failed"} · grade ${result.grade}` +
    (result.reason ? ` · ${result.reason}` : "") + ` · evaluated ${SE.time(result.evaluated_at)}` + (doc.truncated ? " · long event: texts cut" : "");
  textBlock($("item-input"), event.input !== undefined ? event.input : item.input);
  const thread = Array.isArray(doc.thread) ? doc.thread : null;  // a session's turns, when the item has them
  $("item-thread").hidden = !thread; $("item-output").hidden = !!thread;
  $("item-output-title").textContent = thread ? "Thread" : "Output";
  if (thread) { const t = $("item-thread"); clear(t); for (const turn of thread) t.append(SE.el("li", {}, SE.el("b", {}, turn.role || "turn"), " ", turn.text || "")); }
  else textBlock($("item-output"), event.output !== undefined ? event.output : item.output);
  textBlock($("item-expected"), event.expected);
  const refs = $("item-references"); clear(refs);
  for (const ref of event.references || []) refs.append(SE.el("li", {}, ref));
  const judges = $("item-judges").tBodies[0]; clear(judges);
  for (const j of (result.judge && result.judge.judges) || []) {
    const words = [j.reasoning, j.error, j.reason, ...(j.strengths || []).map((s) => "+ " + s), ...(j.weaknesses || []).map((s) => "− " + s)].filter((w, i, all) => w && all.indexOf(w) === i).join("\n");
    judges.append(SE.el("tr", {}, SE.el("td", {}, j.name), SE.el("td", {}, j.status === "ok" ? num(j.score, 1) + " /10" : j.status), SE.el("td", { class: "pre" }, words || "—")));
  }
  if (!judges.children.length) judges.append(SE.el("tr", {}, SE.el("td", { colspan: 3, class: "muted" }, "no judge panel")));
  const gates = result.failed_gates || [];
  $("item-gates").textContent = gates.length ? "failed gates: " + gates.join(", ") : "no gate failed";
  $("item-gates").className = gates.length ? "fail" : "muted";
  const evs = $("item-evaluators").tBodies[0]; clear(evs);
  for (const e of result.evaluators || []) {
    evs.append(SE.el("tr", {}, SE.el("td", {}, e.name), SE.el("td", {}, num(e.score)), SE.el("td", { class: e.passed ? "pass" : "fail" }, e.passed ? "yes" : "no"), SE.el("td", {}, e.error ? "error: " + e.error : e.reason || "")));
  }
  renderForm(doc.form);
}

function renderForm(form) {
  state.scale = form.scale; state.lastDigit = null;
  const [low, high] = SCALES[form.scale] || [0, 1];
  $("form-scale").textContent = `scale ${form.scale}` + (form.category ? ` · rubric ${form.category}` : "");
  $("label-form").reset();
  const score = $("label-score"); score.min = low; score.max = high; score.step = high - low <= 1 ? "0.05" : "1"; score.value = "";
  const buttons = $("score-buttons"); clear(buttons);
  if (high - low >= 2) for (let v = low; v <= high && high <= 10; v++) {
    buttons.append(SE.el("button", { type: "button", "data-score": v, tabindex: "-1", onclick: () => setScore(v) }, String(v)));
  }
  const rows = $("criteria").tBodies[0]; clear(rows);
  for (const c of form.criteria) {
    const hint = [c.meaning, ...c.levels.map((l, i) => `${5 - i}: ${l}`)].filter(Boolean).join(" · ");
    rows.append(SE.el("tr", {}, SE.el("td", {}, `${c.name} ${c.label !== c.name ? c.label : ""}`),
      SE.el("td", {}, SE.el("input", { type: "number", "data-criterion": c.name, min: low, max: high, step: score.step, "aria-label": c.name })),
      SE.el("td", { class: "muted" }, hint)));
  }
  $("criteria").hidden = form.criteria.length === 0;
}

function setScore(v) {
  $("label-score").value = String(v);
  for (const b of $("score-buttons").children) b.classList.toggle("chosen", Number(b.dataset.score) === Number(v));
}

function body() {
  const out = {};
  if ($("label-pass").checked) out.passed = true;
  if ($("label-fail").checked) out.passed = false;
  const score = $("label-score").value;
  if (score !== "") out.score = Number(score);
  const criteria = {};
  for (const input of document.querySelectorAll("#criteria input")) if (input.value !== "") criteria[input.dataset.criterion] = Number(input.value);
  if (Object.keys(criteria).length) out.criteria = criteria;
  const expected = $("label-expected").value.trim(), comment = $("label-comment").value.trim();
  if (expected) out.expected = expected;
  if (comment) out.comment = comment;
  return out;
}

function position(step) {
  const keys = state.items.map((i) => i.key);
  const at = keys.indexOf(state.current);
  const candidates = [];
  if (step > 0) for (let i = at + 1; i < keys.length; i++) candidates.push(state.items[i]);
  else for (let i = (at < 0 ? keys.length : at) - 1; i >= 0; i--) candidates.push(state.items[i]);
  return candidates.filter((i) => i.open || i.mine);
}

async function move(step) {
  for (const item of position(step)) { if (await openItem(item.key)) return true; }
  if (step > 0 && state.current === null && state.items.length) { for (const item of state.items) if (await openItem(item.key)) return true; }
  if (step > 0) say("no further item open to you", "");
  return false;
}

async function afterDone(text) {
  const done = state.current;
  stopRenew();
  state.moving = true;  // the periodic refresh opens nothing meanwhile
  try {
    if (document.activeElement && $("item").contains(document.activeElement)) document.activeElement.blur();
    await refresh(false);  // the figures once the next item is open (openItem), or below
    state.current = null;
    const rest = state.items.filter((i) => i.key !== done && (i.open || i.mine));
    for (const item of rest) if (await openItem(item.key)) { say(text, "ok"); return; }
    state.doc = null; $("item").hidden = true; $("item-none").hidden = false;
    await progress();
    say(text, "ok");
  } finally { state.moving = false; }
}

async function submit() {
  if (!state.current || state.busy) return;
  const label = body();
  if (label.passed === undefined && label.score === undefined) { say("a label needs pass/fail (p / f) or a score (a digit)", "error"); return; }
  state.busy = true;
  let r;
  try { r = await SE.api("POST", `${API}/items/${encodeURIComponent(state.current)}/label`, label); } finally { state.busy = false; }
  if (!r.ok) { say(SE.errorText(r), "error"); return; }
  await afterDone(`labelled ${r.payload.data.label.id} ✓`);
}

async function skip() {
  if (!state.current || state.busy) return;
  const r = await SE.api("POST", `${API}/items/${encodeURIComponent(state.current)}/skip`);
  if (!r.ok) { say(SE.errorText(r), "error"); return; }
  await afterDone("skipped: not shown to you again");
}

function digit(d) {
  const [low, high] = SCALES[state.scale] || [0, 1];
  let v = d;
  const now = Date.now();
  if (high === 10 && d === 0 && state.lastDigit && state.lastDigit.value === 1 && now - state.lastDigit.at < 800) v = 10;
  state.lastDigit = { value: d, at: now };
  if (v >= low && v <= high) setScore(v);
  else say(`score ${v} is outside the scale ${state.scale}`, "error");
}

function onKey(event) {
  const target = event.target;
  const tag = target && target.tagName;
  const typing = tag === "TEXTAREA" || tag === "SELECT" || (tag === "INPUT" && target.type !== "radio");
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) { event.preventDefault(); submit(); return; }
  if (typing) { if (event.key === "Escape") target.blur(); return; }
  if (tag === "BUTTON" && (event.key === "Enter" || event.key === " ")) return;  // the focused button's own click
  if (event.altKey || event.ctrlKey || event.metaKey) return;
  const k = event.key;
  if (state.doc === null && !["j", "n", "ArrowRight", "?"].includes(k)) return;
  if (k === "j" || k === "n" || k === "ArrowRight") move(1);
  else if (k === "k" || k === "ArrowLeft") move(-1);
  else if (k === "p") $("label-pass").checked = true;
  else if (k === "f") $("label-fail").checked = true;
  else if (/^[0-9]$/.test(k)) digit(Number(k));
  else if (k === "Enter") submit();
  else if (k === "s") skip();
  else if (k === "c") $("label-comment").focus();
  else if (k === "e") $("label-expected").focus();
  else if (k === "r") { const first = document.querySelector("#criteria input"); if (first) first.focus(); }
  else if (k === "?") $("help").hidden = !$("help").hidden;
  else return;
  event.preventDefault();
}

async function start() {
  SE.header("review");
  document.querySelector("header nav").append(SE.el("a", { href: "/review", class: "active" }, "标注 Review"));
  $("api-token").addEventListener("change", async (event) => {
    if (!await refresh()) return;  // a wrong token: the field keeps the focus, to be corrected
    // signed in with Enter: the keys are the page's from here on, not typed into the token
    if (document.activeElement === event.target) $("item-card").focus({ preventScroll: true });
    if (!state.current) await move(1);
  });
  for (const name of ["model", "suite", "reason", "order"]) $("filter-" + name).addEventListener("change", refresh);
  document.addEventListener("keydown", onKey);
  $("label-form").addEventListener("submit", (e) => { e.preventDefault(); submit(); });
  $("skip").addEventListener("click", skip);
  $("next").addEventListener("click", () => move(1));
  $("prev").addEventListener("click", () => move(-1));
  $("label-score").addEventListener("input", () => setScore($("label-score").value));
  window.addEventListener("pagehide", () => {  // leaving the page: the item is free again at once, not at the lease's end
    if (state.current && SE.token()) fetch(`${API}/items/${encodeURIComponent(state.current)}/release`, { method: "POST", keepalive: true, headers: { Authorization: "Bearer " + SE.token() } });
  });
  if (await refresh()) await move(1);
  setInterval(async () => { if (!state.busy && !state.moving) { await refresh(); if (!state.current && state.items.some((i) => i.open)) move(1); } }, 5000);
}

start();
