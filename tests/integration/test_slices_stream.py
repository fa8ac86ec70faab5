"""Slices counted exactly once by live workers (docs/segments.md): two workers of one group share the input,
one of them is killed with -9 twice and restarted, and afterwards the slice figures in Redis (every window of
every pair) equal a recount from the results topic (each result once, its slice value from what was sent)."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis
from _support import raw_event

from streameval.embedded import EmbeddedBroker
from streameval.kafka_io import ensure_topics, produce
from streameval.keyspace import Keys
from streameval.store_codec import slice_figures

from .faults_support import LiveReader, write_config

pytestmark = [pytest.mark.integration, pytest.mark.faults]

EVENTS = 4_000
TIERS = ["gold", "silver", "free", "team", 7]  # 7: not a string, counted as (invalid)
CONFIG = """
suites:
  - name: qa
    default: true
    evaluators: [{evaluator: exact_match}]
segments:
  dimensions:
    tier: metadata.tier
    plan: "tag:plan:"
"""


def tier_name(value: Any) -> str:
    return value if isinstance(value, str) else "(invalid)"


async def test_slice_counts_equal_a_recount_under_kill_9_with_two_workers(
    broker: EmbeddedBroker,
    start_worker: Callable[..., Any],
    topics: dict[str, str],
    prefix: str,
    aredis: aioredis.Redis,
    tmp_path: Path,
) -> None:
    rng = random.Random()
    run = f"sl{uuid.uuid4().hex[:6]}"
    sent: dict[str, tuple[str, str, str]] = {}  # id -> model, tier, plan
    events = []
    for i in range(EVENTS):
        tier, plan = rng.choice(TIERS), rng.choice(["pro", "basic", None])
        tags = [f"plan:{plan}"] if plan else []
        events.append(
            raw_event(
                id=f"{run}-{i}",
                model=f"m{i % 2}",
                output=rng.choice(["Paris", "Rome"]),
                expected="Paris",
                metadata={"tier": tier},
                tags=tags,
            )
        )
        sent[f"{run}-{i}"] = (f"m{i % 2}", tier_name(tier), plan or "(missing)")
    await ensure_topics(broker.bootstrap, topics.values(), partitions=2)
    config = write_config(tmp_path, CONFIG)
    app_id = f"slices-{uuid.uuid4().hex[:8]}"
    env = {"STREAMEVAL_BROKER_SESSION_TIMEOUT": "6", "STREAMEVAL_BATCH_MAX": "50"}
    async with LiveReader(broker.bootstrap, topics["results"], topics["deadletter"]) as reader:
        producing = asyncio.create_task(
            produce(broker.bootstrap, topics["requests"], events, key=lambda v: v[8:40])
        )
        steady = start_worker(config, app_id=app_id, **env)
        victim = start_worker(config, app_id=app_id, **env)
        for point in sorted(rng.sample(range(EVENTS // 10, EVENTS * 8 // 10), 2)):
            await reader.wait(point, timeout=180, what=f"kill point {point}")
            os.kill(victim.proc.pid, signal.SIGKILL)
            victim.proc.wait()
            victim = start_worker(config, app_id=app_id, **env)
        assert await producing == len(events)
        await reader.wait(EVENTS, timeout=300, what="every event")
        records = await reader.quiesce()
    assert steady.stop() == 0 and victim.stop() == 0

    results: dict[str, dict[str, Any]] = {}
    for record in records:
        if record.topic == topics["results"]:
            results[(record.key or b"").decode()] = orjson.loads(record.value)
    assert set(results) == set(sent)
    expected: Counter[tuple[str, str, str]] = Counter()
    passes: Counter[tuple[str, str, str]] = Counter()
    for event_id, result in results.items():
        model, tier, plan = sent[event_id]
        for dimension, value in (("tier", tier), ("plan", plan)):
            expected[(model, dimension, value)] += 1
            passes[(model, dimension, value)] += int(result["passed"])

    counted: Counter[tuple[str, str, str]] = Counter()
    counted_passes: Counter[tuple[str, str, str]] = Counter()
    async for key in aredis.scan_iter(match=f"{prefix}{{*}}:sg:*", count=1000):
        pair, dimension = key.decode()[len(prefix) :].split("}:sg:")
        model = Keys.split_pair(pair.lstrip("{"))[0]
        dimension = dimension.split(":")[0]
        for value, figures in slice_figures(await aredis.hgetall(key)).items():
            counted[(model, dimension, value)] += int(figures.get("count", 0))
            counted_passes[(model, dimension, value)] += int(figures.get("passes", 0))
    assert counted == expected
    assert counted_passes == passes
