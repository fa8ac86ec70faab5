"""No stuck results when two workers start together and when a rebalance hits batches in flight.

- The soak: two workers of one consumer group start together on a two-partition topic (the start-up
  rebalance), 5,000 events; every result must be out within 30 s of the last one sent. Runs
  ``STREAMEVAL_SOAK_RUNS`` times (default 2, what CI runs; the full soak is 20:
  ``STREAMEVAL_SOAK_RUNS=20 python -m pytest -m slow tests/integration/test_soak_two_workers.py``).
- The injected case: worker A evaluates slowly (each batch held 0.3 s, injected), so several batches
  are between the take and the publisher when worker B joins and takes a partition from A. Every
  result must still come out (by A, or by B re-reading what A released un-acked).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _support import raw_event

from streameval.embedded import EmbeddedBroker
from streameval.kafka_io import ensure_topics, produce

from .faults_support import LiveReader, write_config

pytestmark = [pytest.mark.integration, pytest.mark.faults]

FAULTINJECT = str(Path(__file__).resolve().parent / "faultinject")
SOAK_RUNS = int(os.environ.get("STREAMEVAL_SOAK_RUNS", "2"))
EVENTS = 5_000


def make_events(run: str, n: int) -> tuple[list[bytes], set[bytes]]:
    values = [
        raw_event(id=f"{run}-{i}", model=f"m{i % 3}", output="Paris", expected="Paris") for i in range(n)
    ]
    return values, {f"{run}-{i}".encode() for i in range(n)}


def key_by_index(value: bytes) -> bytes:
    return value[8:40]  # spreads events over both partitions (the id is near the start)


async def settle(reader: LiveReader, expected: set[bytes], *, after: float) -> set[bytes]:
    """The ids still missing ``after`` seconds past now (or as soon as none is missing)."""
    try:
        await reader.wait_for(lambda: expected <= reader.result_ids, timeout=after, what="every result")
    except AssertionError:
        pass
    return expected - reader.result_ids


@pytest.mark.slow
@pytest.mark.parametrize("run", range(SOAK_RUNS))
async def test_two_workers_started_together_leave_nothing_unpublished(
    run: int,
    broker: EmbeddedBroker,
    start_worker: Callable[..., Any],
    topics: dict[str, str],
    tmp_path: Path,
) -> None:
    tag = f"soak{run}-{uuid.uuid4().hex[:6]}"
    await ensure_topics(broker.bootstrap, topics.values(), partitions=2)
    values, expected = make_events(tag, EVENTS)
    config, app_id = write_config(tmp_path), f"soak-{uuid.uuid4().hex[:8]}"
    async with LiveReader(broker.bootstrap, topics["results"], topics["deadletter"]) as reader:
        workers = [start_worker(config, app_id=app_id), start_worker(config, app_id=app_id)]
        started = time.monotonic()
        for chunk in range(
            0, EVENTS, 250
        ):  # ~8 s of sending: events arrive before, during and after the join
            await produce(broker.bootstrap, topics["requests"], values[chunk : chunk + 250], key=key_by_index)
            await asyncio.sleep(0.4)
        sent = time.monotonic()
        missing = await settle(reader, expected, after=30)
        done = time.monotonic()
    sys.stderr.write(
        f"\nsoak run {run}: {EVENTS} events, {len(expected) - len(missing)} results, "
        f"{len(missing)} missing 30 s after the last send; sent in {sent - started:.1f} s, "
        f"all out {done - sent:.1f} s after\n"
    )
    assert not missing, (
        f"{len(missing)} results missing 30 s after the last event was sent: {sorted(missing)[:10]}"
    )
    for worker in workers:
        assert worker.stop() == 0


async def test_a_rebalance_with_batches_in_flight_leaves_nothing_unpublished(
    broker: EmbeddedBroker,
    start_worker: Callable[..., Any],
    topics: dict[str, str],
    tmp_path: Path,
) -> None:
    tag = f"inj-{uuid.uuid4().hex[:6]}"
    await ensure_topics(broker.bootstrap, topics.values(), partitions=2)
    values, expected = make_events(tag, 3_000)
    config, app_id = write_config(tmp_path), f"inj-{uuid.uuid4().hex[:8]}"
    slow = {
        "PYTHONPATH": FAULTINJECT,
        "STREAMEVAL_TEST_FAULT": "slow",
        "STREAMEVAL_TEST_DELAY_S": "0.3",
        "STREAMEVAL_BATCH_MAX": "50",
        "STREAMEVAL_LOG_LEVEL": "info",
    }
    async with LiveReader(broker.bootstrap, topics["results"], topics["deadletter"]) as reader:
        first = start_worker(config, app_id=app_id, **slow)
        await produce(broker.bootstrap, topics["requests"], values, key=key_by_index)
        await reader.wait(200, timeout=90, what="worker A under way")
        second = start_worker(config, app_id=app_id, **slow)  # joins while A holds batches in flight
        await asyncio.to_thread(_poll_log, first, "Revoking previously assigned partitions", 2, 60)
        missing = await settle(reader, expected, after=120)
    assert not missing, f"{len(missing)} results missing: {sorted(missing)[:10]}"
    assert first.stop() == 0 and second.stop() == 0


def _poll_log(worker: Any, text: str, times: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while worker.log().count(text) < times:
        if time.monotonic() > deadline:
            raise AssertionError(f"no {text!r} in the worker's log after {timeout} s")
        time.sleep(0.1)
