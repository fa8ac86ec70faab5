"""Two workers and a rebalance in the middle (docs/reliability.md): one joins mid-stream, then the first leaves.

Worker A starts alone; once a quarter of the results are out worker B joins the same consumer group
(partitions are split between them); once half are out A is stopped (SIGTERM, a clean leave) and B
takes every partition. Nothing may be lost and the aggregates must count each event once.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from streameval.embedded import EmbeddedBroker
from streameval.kafka_io import ensure_topics, produce

from .faults_support import LiveReader, account, make_stream, write_config

pytestmark = [pytest.mark.integration, pytest.mark.faults]

VALID, INVALID = 10_000, 200


async def test_join_then_leave_loses_nothing(
    broker: EmbeddedBroker,
    start_worker: Callable[..., Any],
    topics: dict[str, str],
    prefix: str,
    aredis: aioredis.Redis,
    tmp_path: Path,
) -> None:
    events, ids, bad = make_stream(VALID, INVALID, seed=5, run=f"b{uuid.uuid4().hex[:6]}")
    await ensure_topics(broker.bootstrap, topics.values(), partitions=2)
    config = write_config(tmp_path)
    app_id = f"rebalance-{uuid.uuid4().hex[:8]}"
    async with LiveReader(broker.bootstrap, topics["results"], topics["deadletter"]) as reader:
        producing = asyncio.create_task(produce(broker.bootstrap, topics["requests"], events))
        first = start_worker(config, app_id=app_id)
        await reader.wait(VALID // 4, timeout=120, what="a quarter of the results")
        second = start_worker(config, app_id=app_id)
        await reader.wait(VALID // 2, timeout=120, what="half of the results")
        left_at = time.time()
        assert await asyncio.to_thread(first.stop) == 0
        stopped_at = time.time()
        recovery = await reader.evaluated_after(stopped_at, timeout=120)
        assert await producing == len(events)
        await reader.wait(VALID, timeout=180, what="every valid event")
        records = await reader.quiesce()
    assert second.stop() == 0
    figures = await account(records, topics, ids, bad, aredis, prefix)
    sys.stderr.write(
        f"\nrebalance (join at {VALID // 4}, leave at {VALID // 2}): {len(events)} events, {figures}, "
        f"clean stop took {stopped_at - left_at:.1f} s, next fresh result {recovery:.1f} s after it\n"
    )
    assert not figures.problems, figures.problems
