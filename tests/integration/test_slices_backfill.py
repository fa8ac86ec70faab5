"""A backfill keeps slices (docs/segments.md, docs/versions.md): the backfilled version's windows are kept per
value like a live worker's, and an interrupted backfill resumed with the same command counts no slice twice."""

from __future__ import annotations

import textwrap
import time
from collections import Counter
from pathlib import Path

import orjson
import pytest
import redis.asyncio as aioredis
from _support import raw_event

from streameval.backfill import run_backfill
from streameval.config import load_config
from streameval.embedded import EmbeddedBroker
from streameval.kafka_io import ensure_topics, produce
from streameval.keyspace import Keys
from streameval.models import format_time
from streameval.store_codec import slice_figures

from .test_versions_backfill import settings_for

pytestmark = pytest.mark.integration

SUITES = """
suites:
  - name: qa
    default: true
    evaluators: [{evaluator: exact_match}]
segments:
  dimensions: {tier: metadata.tier}
"""
TIERS = ["gold", "free", "team"]


async def test_a_resumed_backfill_keeps_each_slice_once(
    broker: EmbeddedBroker,
    topics: dict[str, str],
    aredis: aioredis.Redis,
    redis_url: str,
    prefix: str,
    tmp_path: Path,
) -> None:
    path = tmp_path / "suites.yaml"
    path.write_text(textwrap.dedent(SUITES))
    _, suites = load_config(path)
    version = suites.by_name["qa"].version
    await ensure_topics(broker.bootstrap, topics.values(), partitions=2)
    start = time.time()
    raws = [
        raw_event(
            id=f"bs-{i}",
            model="m",
            output="Paris" if i % 4 else "Rome",
            expected="Paris",
            timestamp=format_time(start + i * 0.01),
            metadata={"tier": TIERS[i % 3]},
        )
        for i in range(60)
    ]
    await produce(broker.bootstrap, topics["requests"], raws, key=lambda v: orjson.loads(v)["id"].encode())
    settings = settings_for(broker, redis_url, prefix, topics)
    since = int((start - 5) * 1000)
    first = await run_backfill(settings, suites, since_ms=since, batch=16, stop_after=20)
    assert first.stopped == "interrupted" and 0 < first.counted < len(raws)
    second = await run_backfill(settings, suites, since_ms=since, batch=16)
    assert second.stopped == "end" and first.counted + second.counted == len(raws)

    keys = Keys(prefix)
    pair = keys.pair_id("m", "qa", version)
    counted: Counter[str] = Counter()
    passes: Counter[str] = Counter()
    async for key in aredis.scan_iter(match=f"{keys.pair(pair)}sg:tier:60:*"):
        for value, figures in slice_figures(await aredis.hgetall(key)).items():
            counted[value] += int(figures["count"])
            passes[value] += int(figures.get("passes", 0))
    assert counted == Counter(TIERS[i % 3] for i in range(60))
    assert passes == Counter(TIERS[i % 3] for i in range(60) if i % 4)
    assert await aredis.smembers(keys.slice_dimensions(pair)) == {b"tier"}
