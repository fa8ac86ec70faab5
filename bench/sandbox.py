"""Per-call latency of the `code` evaluator, warm, for both languages (targets: Python
<= 5 ms, Node <= 3 ms at p50). Baseline measured in the same run: one fresh process per call
(`python -I -c` / `node -e`, unconfined), i.e. what a non-pooled sandbox would cost at least.

    .venv/bin/python bench/sandbox.py [--calls 300]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import subprocess
import sys
import time

from streameval.evaluators import build_evaluator
from streameval.models import RequestEvent

PY = "def evaluate(input, output, expected, metadata):\n    return {'passed': len(output) > 3, 'score': min(1.0, len(output) / 100)}\n"
JS = "module.exports = async function (input, output) { return { passed: output.length > 3, score: Math.min(1, output.length / 100) }; };"
JS_LODASH = (
    "const _ = require('lodash');\nmodule.exports = async function (input, output, expected, metadata) {\n"
    "  const found = metadata.keywords.filter((k) => output.includes(k));\n"
    "  return { passed: true, score: found.length / metadata.keywords.length,"
    " details: { missing: _.difference(metadata.keywords, found) } };\n};"
)

JS_AJV = (
    "const Ajv = require('ajv');\nconst ajv = new Ajv();\n"
    "const check = ajv.compile({ type: 'object', required: ['a'] });\n"
    "module.exports = async function (input, output) { return { passed: check({ a: output }) }; };"
)


def pct(samples: list[float], q: float) -> float:
    return statistics.quantiles(samples, n=100, method="inclusive")[q - 1] if len(samples) > 1 else samples[0]


async def warm(language: str, code: str, calls: int) -> list[float]:
    evaluator = build_evaluator("code", {"language": language, "code": code})
    await evaluator.start()
    event = RequestEvent(
        id="b", model="m", output="hello sandbox world", input="q", metadata={"keywords": ["hello", "x"]}
    )
    try:
        for _ in range(20):  # warm the code caches of every slot
            await evaluator.aevaluate(event)
        samples = []
        for _ in range(calls):
            start = time.perf_counter()
            await evaluator.aevaluate(event)
            samples.append((time.perf_counter() - start) * 1000)
        return samples
    finally:
        await evaluator.close()


def fresh(argv: list[str], calls: int) -> list[float]:
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, env={})
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def report(label: str, samples: list[float], baseline: float) -> None:
    p50, p95 = pct(samples, 50), pct(samples, 95)
    print(f"{label:<34} p50 {p50:7.2f} ms  p95 {p95:7.2f} ms  baseline/p50 {baseline / p50:6.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300)
    calls = parser.parse_args().calls
    py_base = pct(fresh([sys.executable, "-I", "-c", "pass"], 15), 50)
    print(f"baseline: fresh `python -I -c pass` per call p50 {py_base:.1f} ms")
    report("python warm (zygote fork)", asyncio.run(warm("python", PY, calls)), py_base)
    node = shutil.which("node")
    if node is None:
        print("node not found: Node.js figures skipped")
        return
    node_base = pct(fresh([node, "-e", "0"], 15), 50)
    print(f"baseline: fresh `node -e 0` per call p50 {node_base:.1f} ms")
    report("nodejs warm (fresh vm context)", asyncio.run(warm("nodejs", JS, calls)), node_base)
    report("nodejs warm + require('lodash')", asyncio.run(warm("nodejs", JS_LODASH, calls)), node_base)
    report(
        "nodejs warm + ajv (separate realm)",
        asyncio.run(warm("nodejs", JS_AJV, max(20, calls // 10))),
        node_base,
    )


if __name__ == "__main__":
    main()
