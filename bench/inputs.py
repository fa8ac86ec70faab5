"""CPU per evaluated event: one 100-span OTLP export (otlp_proto, otlp_json) against 100 native events.

    .venv/bin/python bench/inputs.py [--rounds 30] [--spans 100] [--no-redis]

The spans are real OpenTelemetry SDK spans (a third each of the OTel GenAI, OpenLLMetry and OpenInference
conventions, ~150-character prompts and answers), encoded as the Collector's kafka exporter writes
them. The native events are the request events those spans become, so both paths evaluate the same
content. Each round takes a fresh export (and fresh native events: ids never repeat, so idempotency
never short-cuts a round).

Three measurements per suite, each as process CPU time per evaluated event (``time.process_time``) and
the ratio to native in the same run (target: at most 2x):

* decode only: ``Inputs.expand`` + ``Pipeline.decode`` of every event;
* in process: decode, route, evaluate (``evaluate_items``), no Redis;
* worker path: ``Processor.process_batch`` with the real Redis store (recording included), also the
  Redis server's CPU per event from ``INFO cpu`` (skipped with ``--no-redis`` or when no Redis answers;
  ``INFO cpu`` counts the whole server: on a Redis shared with other clients that row is noisy).

Suites: ``minimal`` (one regex), and the demo's ``general`` suite (examples/suites.yaml, its default).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import redis.asyncio as aioredis
from _otel import export_json, export_proto, gen_ai_span, openinference_span, openllmetry_span, record

from streameval.batch import evaluate_items
from streameval.config import load_config, parse_config
from streameval.inputs import Inputs, OtlpInput
from streameval.pipeline import Pipeline, Source
from streameval.processor import Processor
from streameval.store import ResultStore

ROOT = Path(__file__).resolve().parent.parent
TOPICS = {"native": "evals.requests", "otlp_proto": "spans.proto", "otlp_json": "spans.json"}
INPUTS = Inputs(
    [
        OtlpInput(topic=TOPICS["otlp_proto"], format="otlp_proto"),
        OtlpInput(topic=TOPICS["otlp_json"], format="otlp_json"),
    ]
)
PROMPT = (
    "请用三句话解释为什么天空是蓝色的，并给出一个日常生活中的例子。Explain it to a ten-year-old, briefly. "
)
ANSWER = "Sunlight is scattered by the air's molecules, and blue light scatters most (Rayleigh scattering). 天空因此呈蓝色。"


def export(spans: int, n: int) -> list[Any]:
    makers = (gen_ai_span, openllmetry_span, openinference_span)
    with record(service="bench") as (tracer, finished):
        for i in range(spans):
            makers[i % 3](tracer, prompt=f"{PROMPT}{n}.{i}", answer=f"{ANSWER}{n}.{i}")
        return list(finished())


def messages(fmt: str, spans: list[Any]) -> list[tuple[bytes, Source]]:
    """One round's messages of ``fmt``: one export, or the native events its spans become."""
    if fmt == "otlp_proto":
        return [(export_proto(spans), Source(TOPICS[fmt], 0, 0))]
    if fmt == "otlp_json":
        return [(export_json(spans), Source(TOPICS[fmt], 0, 0))]
    items = INPUTS.expand([(export_proto(spans), Source(TOPICS["otlp_proto"], 0, 0))])
    return [(item.raw, Source(TOPICS["native"], 0, i)) for i, item in enumerate(items)]


Run = Callable[[list[tuple[bytes, Source]]], Awaitable[int]]


async def measure(rounds: list[list[tuple[bytes, Source]]], run: Run) -> tuple[float, int]:
    """CPU µs per evaluated event over all rounds (making the rounds is not counted), and the event count."""
    events = 0
    cpu = 0.0
    for batch in rounds:
        start = time.process_time()
        events += await run(batch)
        cpu += time.process_time() - start
    return cpu / events * 1e6, events


async def redis_cpu(client: aioredis.Redis) -> float:
    info = await client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def row(label: str, cells: dict[str, float]) -> str:
    return f"{label:20s}" + "".join(
        f"{cells[f]:10.1f} µs ({cells[f] / cells['native']:4.2f}x)" for f in TOPICS
    )


async def run_suite(
    name: str,
    pipeline: Pipeline,
    fresh: Callable[[str], list[list[tuple[bytes, Source]]]],
    client: aioredis.Redis | None,
) -> None:
    async def decode_only(batch: list[tuple[bytes, Source]]) -> int:
        items = INPUTS.expand(batch)
        for item in items:
            pipeline.decode(item.raw)
        return len(items)

    async def in_process(batch: list[tuple[bytes, Source]]) -> int:
        outcomes = await evaluate_items(pipeline, INPUTS.expand(batch))
        assert all(o.result is not None for o in outcomes), [o.dead_letter for o in outcomes if o.dead_letter]
        return len(outcomes)

    print(f"\nsuite {name!r}")
    print(f"{'':20s}" + "".join(f"{fmt:>22s}" for fmt in TOPICS))
    for label, run in (("decode only", decode_only), ("in process", in_process)):
        print(row(label, {fmt: (await measure(fresh(fmt), run))[0] for fmt in TOPICS}), flush=True)
    if client is None:
        return
    prefix = f"bench-inputs:{uuid.uuid4().hex[:8]}:"
    processor = Processor(pipeline, ResultStore(client, prefix=prefix), inputs=INPUTS)

    async def worker_path(batch: list[tuple[bytes, Source]]) -> int:
        published = await processor.process_batch(batch)
        assert all(p.kind == "result" for p in published)
        return len(published)

    cpu, server = {}, {}
    for fmt in TOPICS:
        rounds = fresh(fmt)
        before = await redis_cpu(client)
        cpu[fmt], events = await measure(rounds, worker_path)
        server[fmt] = (await redis_cpu(client) - before) / events * 1e6
    print(row("worker path", cpu))
    print(row("  Redis server CPU", server), flush=True)
    keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=1000)]
    for i in range(0, len(keys), 500):
        await client.delete(*keys[i : i + 500])


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--spans", type=int, default=100)
    parser.add_argument("--no-redis", action="store_true")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    args = parser.parse_args()

    minimal = {
        "suites": [
            {
                "name": "minimal",
                "default": True,
                "evaluators": [{"evaluator": "regex", "params": {"pattern": r"\S"}}],
            }
        ]
    }
    suites = {
        "minimal": parse_config(minimal)[1],
        "general": load_config(ROOT / "examples" / "suites.yaml")[1],
    }
    print(
        f"{args.spans} spans per export, {args.rounds} rounds per cell; µs of process CPU per evaluated event"
    )
    spans = export(args.spans, 0)
    native = messages("native", spans)
    print(
        f"export size: otlp_proto {len(messages('otlp_proto', spans)[0][0]) / 1024:.0f} KiB, otlp_json "
        f"{len(messages('otlp_json', spans)[0][0]) / 1024:.0f} KiB; native event {statistics.mean(len(r) for r, _ in native):.0f} bytes"
    )
    counter = iter(range(1, 10**9))

    def fresh(fmt: str) -> list[list[tuple[bytes, Source]]]:
        """New exports for every cell: ids never repeat within a run."""
        return [messages(fmt, export(args.spans, next(counter))) for _ in range(args.rounds)]

    client: aioredis.Redis | None = None
    if not args.no_redis:
        client = aioredis.Redis.from_url(args.redis_url)
        try:
            await client.ping()
        except Exception as exc:
            print(f"no Redis at {args.redis_url} ({exc}): worker-path rows skipped")
            await client.aclose()
            client = None
    try:
        for name, suite in suites.items():
            await run_suite(name, Pipeline(suite), fresh, client)
    finally:
        if client is not None:
            await client.aclose()
    print("\nratios are against native events in the same run; target <= 2x")


if __name__ == "__main__":
    asyncio.run(main())
