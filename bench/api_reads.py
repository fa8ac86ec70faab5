"""``/health`` latency while the dashboard's stats endpoints are read concurrently, against idle.

    python bench/api_reads.py [--pairs 3000] [--readers 4] [--seconds 10]

Fills a fresh key prefix with ``--pairs`` model × suite pairs over 30 one-minute windows (the store's
own writes), serves the API in this process (as a worker does), then probes ``/health`` every 10 ms:
first with nothing else running (baseline), then while ``--readers`` clients loop over
``/api/v1/stats/pairs``, ``/api/v1/stats/windows`` and ``/api/v1/stats/deadletters`` (default pages).
Prints p50 / p99 / max of ``/health`` and the readers' responses/s and bytes per response.
Redis: REDIS_URL, else 127.0.0.1:6379; keys are deleted afterwards. Nothing asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid

import aiohttp
import redis.asyncio as aioredis

from streameval.api import create_web_app, start_web
from streameval.models import EvaluatorResult, GradedResult, format_time
from streameval.store import ResultStore

SIZE = 60


def _result(i: int, pair: int, at: float) -> GradedResult:
    evaluators = [EvaluatorResult(name=f"ev{k}", score=(i % 7) / 6, passed=True, weight=1) for k in range(5)]
    return GradedResult(
        id=f"e{i}",
        model=f"model-{pair}",
        suite="qa",
        score=(i % 7) / 6,
        passed=True,
        threshold=0.5,
        grade="good",
        evaluators=evaluators,
        event_time=format_time(at),
        evaluated_at=format_time(at),
        latency_ms=3.0,
        pipeline_version="bench",
    )


async def _fill(client: aioredis.Redis, prefix: str, pairs: int) -> None:
    now = time.time()
    start = now - now % SIZE - 29 * SIZE
    store = ResultStore(client, prefix=prefix, windows=(SIZE,), max_pairs=pairs + 1, clock=lambda: now)
    items = [
        (r, b"x", None)
        for i in range(pairs * 4)
        for r in [_result(i, i % pairs, start + (i // pairs) * 8 * SIZE)]
    ]
    for i in range(0, len(items), 1024):
        await store.record_many(items[i : i + 1024])


async def _probe(session: aiohttp.ClientSession, base: str, seconds: float) -> list[float]:
    out = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        t0 = time.perf_counter()
        async with session.get(f"{base}/health") as resp:
            await resp.read()
        out.append((time.perf_counter() - t0) * 1e3)
        await asyncio.sleep(0.01)
    return out


async def _reader(session: aiohttp.ClientSession, base: str, stop: asyncio.Event, sizes: list[int]) -> None:
    paths = ["/api/v1/stats/pairs", "/api/v1/stats/windows", "/api/v1/stats/deadletters"]
    i = 0
    while not stop.is_set():
        async with session.get(base + paths[i % 3]) as resp:
            sizes.append(len(await resp.read()))
        i += 1


def _summary(label: str, samples: list[float]) -> str:
    q = statistics.quantiles(samples, n=100)
    return f"{label:>10}: /health p50 {q[49]:6.2f} ms, p99 {q[98]:6.2f} ms, max {max(samples):7.2f} ms ({len(samples)} probes)"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=3000)
    parser.add_argument("--readers", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--read", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.read:
        stop, sizes = asyncio.Event(), []
        async with aiohttp.ClientSession() as session:
            tasks = [
                asyncio.create_task(_reader(session, args.read, stop, sizes)) for _ in range(args.readers)
            ]
            await asyncio.sleep(args.seconds)
            stop.set()
            await asyncio.gather(*tasks)
        print(" ".join(map(str, sizes)))
        return
    client = aioredis.Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    prefix = f"bench-api:{uuid.uuid4().hex[:8]}:"
    try:
        await _fill(client, prefix, args.pairs)
        runner = await start_web(
            create_web_app(client, prefix=prefix, token=None, windows=(SIZE,)), "127.0.0.1", 0
        )
        port = runner.addresses[0][1]
        base = f"http://127.0.0.1:{port}"
        async with aiohttp.ClientSession() as session:
            idle = await _probe(session, base, args.seconds / 2)
            cpu0 = time.process_time()
            # the readers are other clients: their own process, as a dashboard's browser would be
            readers = await asyncio.create_subprocess_exec(
                sys.executable,
                __file__,
                "--read",
                base,
                "--readers",
                str(args.readers),
                "--seconds",
                str(args.seconds),
                stdout=asyncio.subprocess.PIPE,
            )
            busy = await _probe(session, base, args.seconds)
            out, _ = await readers.communicate()
            sizes = [int(x) for x in out.split()]
            cpu = time.process_time() - cpu0
        await runner.cleanup()
        print(f"{args.pairs} pairs x 30 windows, {args.readers} concurrent readers")
        print(_summary("idle", idle))
        print(_summary("reading", busy))
        print(
            f"{'readers':>10}: {len(sizes) / args.seconds:.1f} responses/s, mean {statistics.fmean(sizes) / 1e3:.1f} kB, "
            f"max {max(sizes) / 1e3:.1f} kB; server process CPU {cpu * 1e3 / max(1, len(sizes)):.1f} ms per response"
        )
        print(
            f"{'ratio':>10}: p99 reading / idle = {statistics.quantiles(busy, n=100)[98] / statistics.quantiles(idle, n=100)[98]:.1f}x"
        )
    finally:
        keys = [k async for k in client.scan_iter(match=f"{prefix}*", count=10_000)]
        for i in range(0, len(keys), 1000):
            await client.delete(*keys[i : i + 1000])
        await client.aclose()


if __name__ == "__main__":
    asyncio.run(main())
