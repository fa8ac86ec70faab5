"""What closing a window costs: worker CPU, Redis calls and CPU, and wall time with a broker slow to answer.

    python bench/closers.py [--models 50] [--windows 20] [--events 10] [--ack-ms 20] [--baseline REF]

Each side (this checkout, and the baseline git ref's ``stream/`` imported as ``streameval``) runs in its own
process against its own fresh ``redis-server``. Per window: ``--models`` model × suite pairs with
``--events`` results each, two alert rules (one fires on every pair); the results are recorded first
(not measured), then one closer publishes every due window (measured): ``time.process_time`` of the
worker, ``INFO commandstats`` calls and ``INFO cpu`` of Redis, wall time. The send answers each message's
delivery ``--ack-ms`` later (a broker's acknowledgement), as the producer does: a closer that waited for
each message in turn would take ``models × 2 × ack`` per window; one that sends all and waits for all
together, about one ``ack``. Nothing is asserted; the figures and ratios are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from redis_cost import ROOT, _info, _load_code, _start_node

SIZE, T0 = 60, 1_800_000_000
CONFIG = {"suites": [{"name": "qa", "default": True, "evaluators": [{"evaluator": "exact_match"}]}]}


async def _measure(port: int, args: argparse.Namespace) -> dict[str, float]:
    import orjson
    import redis.asyncio as aioredis

    from streameval.alerts import AlertRule
    from streameval.config import parse_config
    from streameval.models import format_time
    from streameval.pipeline import Pipeline
    from streameval.store import ResultStore
    from streameval.windows import WindowCloser

    now = [float(T0)]
    client = aioredis.Redis(port=port)
    store = ResultStore(
        client, prefix="bench:", windows=(SIZE,), allowed_lateness_s=1.0, clock=lambda: now[0]
    )
    rules = [
        AlertRule(name="low", metric="mean_score", comparator="<", threshold=2, window=SIZE),
        AlertRule(name="never", metric="pass_rate", comparator=">", threshold=1, window=SIZE),
    ]

    async def clock() -> float:
        return now[0]

    try:  # the alerts' example ids, as a worker with alert rules reads them
        from streameval.features.drilldown import worst_ids

        examples: dict[str, Any] = {"examples": worst_ids}
    except ImportError:  # a baseline from before window steps: its closer reads them itself
        examples = {}
    closer = WindowCloser(store, rules, allowed_lateness_s=1.0, worker_id="bench", clock=clock, **examples)
    _, suites = parse_config(CONFIG)
    pipeline = Pipeline(suites)
    loop = asyncio.get_running_loop()
    messages = [0]

    async def send(message: Any) -> asyncio.Future[None]:
        messages[0] += 1
        delivery: asyncio.Future[None] = loop.create_future()
        loop.call_later(args.ack_ms / 1000, delivery.set_result, None)
        return delivery

    sync = __import__("redis").Redis(port=port)
    cpu = calls = redis_cpu = wall = 0.0
    for w in range(args.windows):
        start = T0 + w * SIZE
        now[0] = start + 1
        results = []
        for m in range(args.models):
            for i in range(args.events):
                raw = orjson.dumps(
                    {
                        "id": f"w{w}-m{m}-{i}",
                        "model": f"m{m}",
                        "output": "Paris" if i % 3 else "Rome",
                        "expected": "Paris",
                        "timestamp": format_time(start + 1 + i % 50),
                    }
                )
                outcome = await pipeline.process(raw)
                assert outcome.result is not None
                results.append((outcome.result, outcome.result.model_dump_json().encode(), None))
        await store.record_many(results)
        now[0] = start + SIZE + 2
        before, t_cpu, t_wall = _info(sync), time.process_time(), time.perf_counter()
        published = await closer.run_once(send)
        wall += time.perf_counter() - t_wall
        cpu += time.process_time() - t_cpu
        after = _info(sync)
        calls += after["calls"] - before["calls"] - 2  # the two INFO calls themselves
        redis_cpu += after["cpu"] - before["cpu"]
        assert published == 1
    await client.aclose()
    n = args.windows
    return {
        "worker_cpu_ms": cpu / n * 1000,
        "redis_calls": calls / n,
        "redis_cpu_ms": redis_cpu / n * 1000,
        "wall_ms": wall / n * 1000,
        "messages": messages[0] / n,
    }


def _child(args: argparse.Namespace) -> None:
    if args.code:
        _load_code(Path(args.code))
    with tempfile.TemporaryDirectory(prefix="closers-") as tmp:
        port, proc = _start_node(tmp)
        try:
            figures = asyncio.run(_measure(port, args))
        finally:
            proc.terminate()
            proc.wait()
    print(json.dumps(figures))


def _run(label: str, args: argparse.Namespace, code: Path | None) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--child", "--models", str(args.models), "--windows", str(args.windows)]
    cmd += ["--events", str(args.events), "--ack-ms", str(args.ack_ms)] + (
        ["--code", str(code)] if code else []
    )
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    figures: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    print(
        f"{label:>12}: worker CPU {figures['worker_cpu_ms']:7.2f} ms/window, Redis {figures['redis_calls']:6.1f} "
        f"calls/window ({figures['redis_cpu_ms']:6.2f} ms CPU), wall {figures['wall_ms']:7.1f} ms/window, "
        f"{figures['messages']:.0f} messages/window"
    )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=50)
    parser.add_argument("--windows", type=int, default=20)
    parser.add_argument("--events", type=int, default=10, help="results per model and window")
    parser.add_argument("--ack-ms", type=float, default=20.0, help="the broker's answer to each message")
    parser.add_argument("--baseline", default="main", help="git ref of the baseline (its stream/)")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--code", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return
    print(
        f"{args.windows} windows of {args.models} pairs x {args.events} results, 2 rules, "
        f"broker answer {args.ack_ms:g} ms"
    )
    base = None
    if not args.no_baseline:
        with tempfile.TemporaryDirectory(prefix="closers-base-") as tmp:
            archive = subprocess.run(
                ["git", "-C", str(ROOT), "archive", args.baseline, "stream"], check=True, capture_output=True
            )
            subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
            base = _run(args.baseline, args, Path(tmp) / "stream")
    ours = _run("this", args, None)
    if base is not None:
        print(
            f"{'ratio':>12}: worker CPU {ours['worker_cpu_ms'] / base['worker_cpu_ms']:.3f}x, Redis calls "
            f"{ours['redis_calls'] / base['redis_calls']:.3f}x, Redis CPU {ours['redis_cpu_ms'] / base['redis_cpu_ms']:.3f}x"
        )


if __name__ == "__main__":
    main()
