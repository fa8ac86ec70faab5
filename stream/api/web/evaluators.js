/* /evaluators: the evaluator-module spec §6 list page — presets (read-only) and custom evaluators
   in two tabs. */
"use strict";
// the evaluator-module spec §6: the display names of the five presets
const PRESET_LABELS = { exact_match: "精确匹配", contains: "包含匹配", regex: "正则匹配", json_schema: "JSON Schema", similarity: "相似度" };
const LANGUAGES = { nodejs: "Node.js", python: "Python" };
const message = document.getElementById("message");

function showTab(tab) {
  for (const name of ["presets", "custom"]) {
    document.getElementById(`panel-${name}`).hidden = name !== tab;
    document.getElementById(`tab-${name}`).classList.toggle("active", name === tab);
  }
  history.replaceState(null, "", `#${tab}`);
}

async function load() {
  const [presets, custom] = await Promise.all([SE.api("GET", "/api/v1/evaluators?type=preset"), SE.api("GET", "/api/v1/evaluators?type=code")]);
  if (!presets.ok || !custom.ok) { message.className = "message error"; message.textContent = SE.errorText(presets.ok ? custom : presets); return; }
  const presetBody = document.querySelector("#presets-table tbody");
  presetBody.replaceChildren(...presets.payload.data.map((e) => SE.el("tr", { "data-id": e.id },
    SE.el("td", {}, SE.el("a", { href: `/evaluators/${encodeURIComponent(e.id)}` }, PRESET_LABELS[e.id] ? `${PRESET_LABELS[e.id]} (${e.name})` : e.name)),
    SE.el("td", { title: e.description || "" }, e.description || ""))));
  const customBody = document.querySelector("#custom-table tbody");
  customBody.replaceChildren(...custom.payload.data.map((e) => SE.el("tr", { "data-id": e.id },
    SE.el("td", { title: e.description || "" }, SE.el("a", { href: `/evaluators/${e.id}` }, e.name)),
    SE.el("td", {}, e.type === "code" ? "代码" : e.type),
    SE.el("td", {}, LANGUAGES[e.language] || e.language || ""),
    SE.el("td", {}, SE.time(e.updatedAt)),
    SE.el("td", {},
      SE.el("a", { href: `/evaluators/${e.id}`, class: "edit" }, "编辑"), " ",
      SE.el("button", { class: "danger delete", onclick: () => remove(e) }, "删除")))));
  document.getElementById("custom-empty").hidden = custom.payload.data.length > 0;
}

async function remove(evaluator) {
  if (!confirm(`删除评估器 ${evaluator.name}?`)) return;
  const result = await SE.api("DELETE", `/api/v1/evaluators/${evaluator.id}`);
  message.className = result.ok ? "message ok" : "message error";
  message.textContent = result.ok ? `已删除 ${evaluator.name}` : SE.errorText(result);
  await load();
}

SE.header("evaluators");
for (const button of document.querySelectorAll(".tabs button")) button.addEventListener("click", () => showTab(button.dataset.tab));
showTab(location.hash === "#custom" ? "custom" : "presets");
load();
