"""Costs of the window statistics, each against a baseline measured in the same run.

    python bench/stats.py [--units 1000] [--batches 20]

(a) Krippendorff's alpha (interval) for 3 judges × ``units`` integer scores 1-5: the closed form from
    summed counters (streameval.stats) against the ``krippendorff`` package (test extra); both values
    are printed, they agree to 1e-9.
(b) Recording batches of 256 judged results in Redis: with the judge panel's counters (per judge,
    per pair, alpha) against the same results without panel counters; events/s and the ratio.
Redis: REDIS_URL, else 127.0.0.1:6379. Keys go under a fresh prefix and are deleted. Nothing asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import time
import uuid

import krippendorff
import numpy as np
import orjson
import redis.asyncio as aioredis

from streameval.config import parse_config
from streameval.judges import agreement_counters, judge_counters
from streameval.models import GradedResult, JudgeVerdict
from streameval.pipeline import Pipeline
from streameval.stats import alpha_unit, krippendorff_alpha
from streameval.store import ResultStore


def bench_alpha(units: int) -> None:
    rng = random.Random(3)
    data = [[rng.randint(1, 5) for _ in range(3)] for _ in range(units)]
    start = time.perf_counter()
    terms = [alpha_unit([float(v) for v in unit]) for unit in data]
    ours = krippendorff_alpha(*(sum(t[i] for t in terms) for i in range(4)))
    closed = time.perf_counter() - start
    start = time.perf_counter()
    reference = krippendorff.alpha(
        reliability_data=np.array(data, dtype=float).T, level_of_measurement="interval"
    )
    package = time.perf_counter() - start
    print(
        f"(a) alpha, 3 judges x {units} units: closed form {ours:.12f} in {closed * 1e3:.2f} ms; "
        f"krippendorff {reference:.12f} in {package * 1e3:.2f} ms; package / closed form = {package / closed:.1f}x"
    )


async def bench_record(batches: int) -> None:
    _, suites = parse_config(
        {"suites": [{"name": "s", "default": True, "evaluators": [{"evaluator": "exact_match"}]}]}
    )
    pipeline = Pipeline(suites)
    raw = orjson.dumps({"id": "x", "model": "m", "output": "Paris", "expected": "Paris"})
    outcome = await pipeline.process(raw)
    assert outcome.result is not None
    template: GradedResult = outcome.result
    verdicts = [
        JudgeVerdict(
            name=f"j{i}",
            model="m",
            weight=1 / 3,
            status="ok",
            prompt="standard",
            scale="0-10",
            score=float(5 + i),
            prompt_tokens=300,
            completion_tokens=80,
        )
        for i in range(3)
    ]
    # added under the one evaluator of the template result (the store keys counters by result name)
    panel = {**judge_counters(verdicts), **agreement_counters([verdicts])}
    client = aioredis.Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379"))
    prefix = f"bench-stats-{uuid.uuid4().hex[:8]}:"
    store = ResultStore(client, prefix=prefix, windows=(60, 3600))
    rates = {}
    try:
        for label, counters in (
            ("without panel counters", None),
            ("with panel counters", {"exact_match": panel}),
        ):
            items = [
                [template.model_copy(update={"id": f"{label}-{b}-{i}"}) for i in range(256)]
                for b in range(batches)
            ]
            start = time.perf_counter()
            for batch in items:
                await store.record_many([(r, r.model_dump_json().encode(), counters) for r in batch])
            rates[label] = batches * 256 / (time.perf_counter() - start)
            print(
                f"(b) record, {batches} batches of 256, {label}: {rates[label]:,.0f} events/s "
                f"({len(panel) if counters else 0} panel fields per event)"
            )
        print(
            f"    ratio with / without = {rates['with panel counters'] / rates['without panel counters']:.2f}"
        )
    finally:
        keys = [k async for k in client.scan_iter(match=f"{prefix}*", count=1000)]
        if keys:
            await client.delete(*keys)
        await client.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--units", type=int, default=1000)
    parser.add_argument("--batches", type=int, default=20)
    args = parser.parse_args()
    bench_alpha(args.units)
    asyncio.run(bench_record(args.batches))


if __name__ == "__main__":
    main()
