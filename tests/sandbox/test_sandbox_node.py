"""The Node.js code sandbox against hostile code, plus the evaluator-module spec's examples; the host serves on after each."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from _support import event as request_event

from streameval.evaluators import build_evaluator
from streameval.models import RequestEvent
from streameval.sandbox import NODE_MODULES, SandboxError, SandboxTimeout, probe
from streameval.sandbox._launch import NODE_DIR
from streameval.sandbox._stage import host_node_dir

_READY = shutil.which("node") is not None and all(
    (NODE_DIR / "node_modules" / m).is_dir() for m in NODE_MODULES
)
pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(bool(probe().missing), reason=f"sandbox mechanisms missing: {probe().missing}"),
    pytest.mark.skipif(
        not _READY, reason="node or the sandbox modules are missing (python -m streameval.sandbox.setup)"
    ),
]


def nodejs(code: str, timeout_ms: int = 5000) -> object:
    return build_evaluator("code", {"language": "nodejs", "code": code, "timeout_ms": timeout_ms})


def event(output: str = "hello world", **metadata: object) -> RequestEvent:
    return request_event(id=str(uuid.uuid4()), output=output, input="q", metadata=dict(metadata))


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def anchor() -> AsyncIterator[object]:
    evaluator = nodejs(
        "module.exports = async (input, output) => ({ passed: output === 'hello world', reason: 'benign' });"
    )
    await evaluator.start()
    yield evaluator
    await evaluator.close()


async def run(evaluator: object, ev: RequestEvent | None = None) -> object:
    await evaluator.start()
    try:
        return await evaluator.aevaluate(ev or event())
    finally:
        await evaluator.close()


def body(text: str) -> str:
    return "module.exports = async function evaluate(input, output, expected, metadata) {\n" + text + "\n};"


HOSTILE = [
    ("require net", body("require('net').connect(80, '1.1.1.1');"), 'module "net" is not available'),
    ("require dgram", body("require('dgram').createSocket('udp4');"), 'module "dgram" is not available'),
    (
        "require dns",
        body("await require('dns').promises.lookup('example.com');"),
        'module "dns" is not available',
    ),
    (
        "require fs",
        body("return { passed: true, reason: require('fs').readFileSync('/etc/passwd', 'utf8') };"),
        'module "fs" is not available',
    ),
    ("require child_process", body("require('child_process').execSync('id');"), 'module "child_process"'),
    (
        "process is absent",
        body("return { passed: true, reason: String(process.env) };"),
        "process is not defined",
    ),
    (
        "constructor.constructor escape",
        body("return { passed: true, reason: String(this.constructor.constructor('return process')()) };"),
        "Code generation from strings disallowed",
    ),
    (
        "function constructor via require",
        body("return { passed: true, reason: String(require.constructor('return process')()) };"),
        "Code generation from strings disallowed",
    ),
    (
        "escape through a module object",
        "const _ = require('lodash');\n"
        + body("return { passed: true, reason: String(_.constructor.constructor('return process')()) };"),
        "Code generation from strings disallowed",
    ),
    (
        "no code generation even beside ajv",
        "const Ajv = require('ajv');\n"
        + body("return { passed: true, reason: String(this.constructor.constructor('return 1')()) };"),
        "Code generation from strings disallowed",
    ),
    (
        "no code generation through the ajv stand-in",
        "const Ajv = require('ajv');\n"
        + body("return { passed: true, reason: String(new Ajv().constructor.constructor('return 1')()) };"),
        "Code generation from strings disallowed",
    ),
    (
        "ajv keywords need functions",
        "const Ajv = require('ajv');\n" + body("new Ajv().addKeyword({ keyword: 'x' });"),
        "addKeyword is not available",
    ),
    (
        "eval",
        body("return { passed: true, reason: String(eval('1 + 1')) };"),
        "Code generation from strings disallowed",
    ),
    (
        "timers are absent",
        body("await new Promise((r) => setTimeout(r, 10000));"),
        "setTimeout is not defined",
    ),
    ("deep recursion", body("const f = (n) => f(n + 1) + 1; f(0);"), "Maximum call stack"),
    (
        "array buffer bomb",
        body("const b = new ArrayBuffer(2 ** 32); return { passed: true };"),
        "Array buffer allocation failed|Invalid array buffer length",
    ),
    (
        "many array buffers",
        body("const k = []; for (let i = 0; i < 100; i++) k.push(new Uint8Array(100 * 2 ** 20).fill(1));"),
        "Array buffer allocation failed",
    ),
    ("never settles", body("await new Promise(() => {});"), "did not settle"),
    ("bad return", body("return { passed: 'yes' };"), "boolean 'passed'"),
    ("score above 1", body("return { passed: true, score: 3 };"), r"must be in \[0, 1\]"),
    ("too large", body("return { passed: true, details: { x: 'y'.repeat(200000) } };"), "larger than"),
    ("not a function", "module.exports = 42;", "module.exports = async function"),
]


@pytest.mark.parametrize(("code", "needle"), [c[1:] for c in HOSTILE], ids=[c[0] for c in HOSTILE])
async def test_hostile_code_is_contained(anchor: object, code: str, needle: str) -> None:
    import re

    with pytest.raises(SandboxError) as caught:
        await run(nodejs(code))
    assert caught.value.code == "execution_failed"
    assert re.search(needle, str(caught.value)), str(caught.value)
    assert (await anchor.aevaluate(event())).passed


RUNAWAY = [
    ("infinite loop", body("while (true) {}")),
    ("microtask loop", body("const f = () => Promise.resolve().then(f); f(); await new Promise(() => {});")),
    ("Atomics.wait", body("Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1e9);")),
    (
        "hostile thrown proxy",
        "throw new Proxy({}, { get() { while (true) {} } });\nmodule.exports = async () => ({});",
    ),
]


@pytest.mark.parametrize("code", [c[1] for c in RUNAWAY], ids=[c[0] for c in RUNAWAY])
async def test_runaway_code_times_out_and_the_host_is_replaced(anchor: object, code: str) -> None:
    with pytest.raises(SandboxTimeout):
        await run(nodejs(code, timeout_ms=300))
    assert (await anchor.aevaluate(event())).passed


async def test_heap_bomb_kills_only_its_host(anchor: object) -> None:
    with pytest.raises(SandboxError) as caught:
        await run(
            nodejs(body("const a = []; while (true) a.push(new Array(1e6).fill(1));"), timeout_ms=20000)
        )
    assert "died" in str(caught.value)
    assert (await anchor.aevaluate(event())).passed


async def test_prototype_pollution_does_not_leak_between_calls(anchor: object) -> None:
    polluter = nodejs(
        "const _ = require('lodash');\n"
        + body(
            "Object.prototype.polluted = true; Array.prototype.includes = () => true;"
            "Object.getPrototypeOf(_).hacked = 1; _.difference = () => [];"
            'JSON.stringify = () => \'{"ok":{"passed":true}}\';'
            "return { passed: true };"
        )
    )
    checker = nodejs(
        "const _ = require('lodash');\n"
        + body(
            "return { passed: ({}).polluted === undefined && ![1].includes(2) && _.difference([1, 2], [1]).length === 1"
            " && Object.getPrototypeOf(_).hacked === undefined };"
        )
    )
    await polluter.start()
    await checker.start()
    try:
        for _ in range(4):  # both slots see both evaluators
            assert (await polluter.aevaluate(event())).passed
            assert (await checker.aevaluate(event())).passed
    finally:
        await polluter.close()
        await checker.close()


async def test_console_flood_is_discarded(anchor: object) -> None:
    score = await run(
        nodejs(
            body("for (let i = 0; i < 100000; i++) console.log('x'.repeat(100)); return { passed: true };")
        )
    )
    assert score.passed


async def test_seed_001_length_check(anchor: object) -> None:
    # the evaluator-module spec §4.4, verbatim
    code = """module.exports = async function evaluate(input, output, expected, metadata) {
  const minLength = metadata.minLength || 100;

  if (output.length < minLength) {
    return {
      passed: false,
      score: output.length / minLength,
      reason: `输出长度 ${output.length} 小于要求的 ${minLength}`
    };
  }

  return { passed: true, score: 1.0, reason: '长度符合要求' };
};"""
    short = await run(nodejs(code), event("x" * 30, minLength=60))
    assert (short.passed, short.score, short.reason) == (False, 0.5, "输出长度 30 小于要求的 60")
    assert (await run(nodejs(code), event("x" * 100))).passed


async def test_seed_001_keyword_check(anchor: object) -> None:
    # the evaluator-module spec §4.4, verbatim
    code = """const _ = require('lodash');

module.exports = async function evaluate(input, output, expected, metadata) {
  const keywords = metadata.keywords || [];
  const foundKeywords = keywords.filter(kw => output.includes(kw));
  const coverage = foundKeywords.length / keywords.length;

  return {
    passed: coverage >= 0.8,
    score: coverage,
    reason: `包含关键词 ${foundKeywords.length}/${keywords.length}`,
    details: { foundKeywords, missingKeywords: _.difference(keywords, foundKeywords) }
  };
};"""
    score = await run(
        nodejs(code), event("流式 评估 系统", keywords=["流式", "评估", "Kafka", "Redis", "系统"])
    )
    assert (score.passed, score.score) == (False, 0.6)
    assert score.details == {"foundKeywords": ["流式", "评估", "系统"], "missingKeywords": ["Kafka", "Redis"]}


async def test_allowed_modules_work(anchor: object) -> None:
    code = """const dayjs = require('dayjs');
const validator = require('validator');
const Ajv = require('ajv');
module.exports = async function (input, output, expected, metadata) {
  const ajv = new Ajv();
  const data = JSON.parse(output);
  const ok = ajv.validate({ type: 'object', required: ['email'], properties: { email: { type: 'string' } } }, data);
  return { passed: ok && validator.isEmail(data.email) && dayjs('2024-02-29').isValid(),
           reason: ok ? 'valid' : ajv.errorsText(),
           details: { processType: typeof process } };
};"""
    good = await run(nodejs(code), event('{"email": "a@example.com"}'))
    assert good.passed and good.details == {"processType": "undefined"}
    bad = await run(nodejs(code), event('{"mail": 1}'))
    assert not bad.passed and "email" in (bad.reason or "")


async def test_ajv_compile_api(anchor: object) -> None:
    code = """const Ajv = require('ajv').default;
const ajv = new Ajv({ allErrors: true });
const check = ajv.compile({ type: 'object', properties: { n: { type: 'integer', minimum: 1 } }, required: ['n'] });
module.exports = async function (input, output) {
  const ok = check(JSON.parse(output));
  return { passed: ok, details: { errors: (check.errors || []).map((e) => e.instancePath + ' ' + e.message) } };
};"""
    assert (await run(nodejs(code), event('{"n": 3}'))).passed
    bad = await run(nodejs(code), event('{"n": 0}'))
    assert not bad.passed and bad.details == {"errors": ["/n must be >= 1"]}


async def test_host_process_is_confined_even_without_vm_isolation() -> None:
    """Run plain node (full API, no vm) under the launcher: files, network and processes all fail."""
    script = r"""
const out = {};
const attempt = (name, fn) => { try { fn(); out[name] = 'ALLOWED'; } catch (e) { out[name] = e.code || e.message; } };
attempt('read', () => require('fs').readFileSync('/etc/passwd'));
attempt('write', () => require('fs').writeFileSync('/tmp/sandbox-node-write', 'x'));
attempt('list', () => require('fs').readdirSync('/'));
attempt('spawn', () => { const r = require('child_process').spawnSync('/bin/true'); if (r.error) throw r.error; });
attempt('kill', () => process.kill(1, 0));
const net = require('net');
const s = net.connect(80, '1.1.1.1');
s.on('error', (e) => { out.tcp = e.code; process.stdout.write(JSON.stringify(out)); process.exit(0); });
s.on('connect', () => { out.tcp = 'ALLOWED'; process.stdout.write(JSON.stringify(out)); process.exit(0); });
"""
    node = shutil.which("node")
    node_dir = host_node_dir()
    argv = [
        sys.executable,
        "-I",
        "-m",
        "streameval.sandbox._launch",
        "--data-mb",
        "512",
        "--node-dir",
        str(node_dir),
        "--",
        node,
        f"--openssl-config={node_dir / 'openssl.cnf'}",
        "-e",
        script,
    ]
    done = subprocess.run(argv, capture_output=True, timeout=30, env={}, check=False)
    results = json.loads(done.stdout)
    assert results.keys() == {"read", "write", "list", "spawn", "kill", "tcp"}
    assert "ALLOWED" not in results.values(), results


async def test_hosts_are_recycled_after_n_calls(anchor: object) -> None:
    pool = anchor._pool
    before = {slot.proc.pid for slot in pool._all}
    pool.recycle_after = 2
    try:
        for _ in range(40):
            assert (await anchor.aevaluate(event())).passed
            if not before & {slot.proc.pid for slot in pool._all}:
                break
    finally:
        pool.recycle_after = 1000
    assert not before & {slot.proc.pid for slot in pool._all}
