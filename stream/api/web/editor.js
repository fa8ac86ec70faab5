/* /evaluators/{id}: the evaluator-module spec §6 editor — basic info, parameters, code with highlighting,
   test run.
   "new" creates a custom evaluator; a preset is shown read-only and can only be test-run. */
"use strict";
const TEMPLATES = {
  nodejs: "// 返回格式: { passed: boolean, score?: number, reason?: string }\nmodule.exports = async function evaluate(input, output, expected, metadata) {\n  return { passed: true, score: 1.0, reason: '通过' };\n};\n",
  python: "# 返回格式: {\"passed\": bool, \"score\": float?, \"reason\": str?}\ndef evaluate(input, output, expected, metadata):\n    return {\"passed\": True, \"score\": 1.0, \"reason\": \"通过\"}\n",
};
const $ = (id) => document.getElementById(id);
const evaluatorId = decodeURIComponent(location.pathname.split("/").pop());
const isNew = evaluatorId === "new";
let current = null;
const editor = Highlight.attach($("code"), $("code-view"), "nodejs");

function say(text, ok) { $("message").className = ok ? "message ok" : "message error"; $("message").textContent = text; }

function fill(evaluator) {
  current = evaluator;
  $("title").textContent = evaluator.name;
  $("name").value = evaluator.name;
  $("description").value = evaluator.description || "";
  if (evaluator.isPreset) return showPreset(evaluator);
  $("type").value = "code";
  $("language").value = evaluator.config.language;
  $("timeout").value = evaluator.config.timeout;
  $("code").value = evaluator.config.code;
  editor.setLanguage(evaluator.config.language);
  $("title").textContent = `${evaluator.name} · v${evaluator.version}`;
}

function showPreset(evaluator) {
  // presets are read-only (the evaluator-module spec §5): every field disabled, no save; the server
  // refuses writes too
  $("readonly-badge").hidden = false;
  $("save").hidden = true;
  $("code-section").hidden = true;
  $("type").value = "preset";
  for (const id of ["name", "description", "type"]) $(id).disabled = true;
  // a preset has no language or timeout of its own: show only the fields it has
  for (const id of ["language", "timeout"]) $(id).closest("label").hidden = true;
  $("test-params-label").hidden = false;
  $("test-params").value = JSON.stringify(evaluator.config.params);
  $("test-hint").textContent = "params configure the preset, e.g. regex {\"pattern\": \"...\"}";
  const schema = evaluator.paramsSchema || { properties: {} };
  const required = new Set(schema.required || []);
  $("params-block").hidden = false;
  $("params-table").querySelector("tbody").replaceChildren(...Object.entries(schema.properties || {}).map(([name, prop]) =>
    SE.el("tr", {}, SE.el("td", {}, name), SE.el("td", {}, prop.type || (prop.anyOf || []).map((t) => t.type || t.$ref || "").filter(Boolean).join(" | ") || "any"),
      SE.el("td", {}, required.has(name) ? "必填" : JSON.stringify(prop.default)), SE.el("td", { title: prop.description || "" }, prop.description || ""))));
}

function body() {
  return {
    name: $("name").value.trim(),
    description: $("description").value.trim() || null,
    type: "code",
    config: { language: $("language").value, code: $("code").value, timeout: Number($("timeout").value) },
  };
}

async function save() {
  const result = isNew ? await SE.api("POST", "/api/v1/evaluators", body()) : await SE.api("PUT", `/api/v1/evaluators/${current.id}`, body());
  if (!result.ok) return say(SE.errorText(result), false);
  const saved = result.payload.data;
  if (isNew) { location.href = `/evaluators/${saved.id}?created=1`; return; }
  fill(saved);
  say(`已保存 (version ${saved.version})`, true);
}

function parseJson(id) {
  try { return JSON.parse($(id).value || "{}"); } catch (e) { throw new Error(`${id.replace("test-", "")}: ${e.message}`); }
}

async function runTest() {
  if (isNew) return say("先保存评估器再测试 (save before a test run)", false);
  let payload;
  try {
    payload = { input: $("test-input").value, output: $("test-output").value, expected: $("test-expected").value, metadata: parseJson("test-metadata") };
    if (current.isPreset) payload.params = parseJson("test-params");
  } catch (e) { return say(e.message, false); }
  $("test-result").textContent = "结果: 运行中…";
  const result = await SE.api("POST", `/api/v1/evaluators/${encodeURIComponent(current.id)}/test`, payload);
  const data = result.payload && result.payload.data;
  const box = $("test-result");
  if (result.ok) {
    box.className = data.passed ? "result pass" : "result fail";
    box.textContent = `结果: ${data.passed ? "✓" : "✗"} passed=${data.passed}, score=${data.score}` +
      (data.reason ? `\nreason: ${data.reason}` : "") + `\nlatency: ${data.latencyMs} ms` + (data.version ? `  version: ${data.version}` : "");
  } else if (result.payload && result.payload.code === 503002) {
    box.className = "result fail";
    box.textContent = `结果: ✗ 执行失败 (503002) error=${data.error}\nreason: ${data.reason}\nlatency: ${data.latencyMs} ms`;
  } else {
    box.className = "result fail";
    box.textContent = `结果: ✗ ${SE.errorText(result)}`;
  }
}

async function init() {
  SE.header("evaluators");
  $("save").addEventListener("click", save);
  $("run-test").addEventListener("click", runTest);
  $("language").addEventListener("change", () => {
    const language = $("language").value;
    if (isNew && Object.values(TEMPLATES).includes($("code").value)) $("code").value = TEMPLATES[language];
    editor.setLanguage(language);
  });
  if (isNew) {
    $("title").textContent = "新建评估器";
    $("code").value = TEMPLATES.nodejs;
    editor.update();
    return;
  }
  if (new URLSearchParams(location.search).has("created")) say("已创建", true);
  const result = await SE.api("GET", `/api/v1/evaluators/${encodeURIComponent(evaluatorId)}`);
  if (!result.ok) { $("save").disabled = true; $("run-test").disabled = true; return say(SE.errorText(result), false); }
  fill(result.payload.data);
}
init();
