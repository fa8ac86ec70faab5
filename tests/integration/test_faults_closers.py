"""kill -9 the worker again and again while windows close, with the broker slow to acknowledge.

Tansu sits behind a TCP proxy that holds every answer of the broker for a while (a remote or busy
cluster): a window's messages are long between "sent" and "acknowledged". The worker is killed each time
a window starts going out, and restarted. In the end every event is counted in exactly one published
aggregate, every aggregate has its alert (the rule fires on every window), and every repeat of an
aggregate or an alert is byte for byte the first copy (docs/reliability.md, what each topic promises).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis
from _support import raw_event, wait_until
from security_helpers import TansuBehind

from streameval.embedded import free_port
from streameval.kafka_io import Record, ensure_topics, produce, tail
from streameval.keyspace import Keys
from streameval.models import format_time

pytestmark = [pytest.mark.integration, pytest.mark.faults]

SIZE, MODELS, KILLS, ACK_DELAY_S = 2, 8, 4, 0.25
CONFIG = f"""
windowing: {{allowed_lateness_s: 1, close_interval_s: 0.2, lease_s: 3}}
suites:
  - name: qa
    default: true
    evaluators: [{{evaluator: exact_match}}]
alerts:
  - {{name: every-window, metric: mean_score, comparator: "<", threshold: 2, window: {SIZE}}}
"""


@contextlib.asynccontextmanager
async def slow_answers(port: int, upstream: int, delay_s: float) -> AsyncIterator[None]:
    """A TCP proxy on ``port`` to ``upstream`` that holds each chunk of the broker's answers ``delay_s``."""

    async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
        try:
            while data := await reader.read(65536):
                if delay:
                    await asyncio.sleep(delay)  # the point: a broker slow to answer
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", upstream)
        except OSError:
            writer.close()
            return
        await asyncio.gather(pump(reader, up_writer, 0.0), pump(up_reader, writer, delay_s))

    server = await asyncio.start_server(connect, "127.0.0.1", port)
    try:
        yield
    finally:
        server.close()


async def test_kill_9_while_windows_close_loses_no_aggregate_and_no_alert(
    start_worker: Callable[..., Any],
    topics: dict[str, str],
    aredis: aioredis.Redis,
    prefix: str,
    tmp_path: Path,
) -> None:
    proxy_port = free_port()
    with TansuBehind(proxy_port) as tansu:
        async with slow_answers(proxy_port, tansu.port, ACK_DELAY_S):
            await run(f"127.0.0.1:{proxy_port}", start_worker, topics, aredis, prefix, tmp_path)


async def run(
    bootstrap: str,
    start_worker: Callable[..., Any],
    topics: dict[str, str],
    aredis: aioredis.Redis,
    prefix: str,
    tmp_path: Path,
) -> None:
    config = tmp_path / "suites.yaml"
    config.write_text(CONFIG)
    await ensure_topics(bootstrap, topics.values(), partitions=2)
    env = {
        "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "STREAMEVAL_WINDOWS": str(SIZE),
        "STREAMEVAL_BROKER_SESSION_TIMEOUT": "6",
    }
    out: list[Record] = []

    async def read() -> None:
        async for record in tail(bootstrap, [topics["aggregates"], topics["alerts"]]):
            out.append(record)

    reader = asyncio.create_task(read())
    sent = 0

    async def events() -> None:  # MODELS events every 0.25 s, stamped with the Redis clock
        nonlocal sent
        for batch in range(120):
            seconds, micros = await aredis.time()
            now = seconds + micros / 1e6
            values = [
                raw_event(
                    id=f"e{batch}-{m}",
                    model=f"m{m}",
                    output="Paris",
                    expected="Paris",
                    timestamp=format_time(now),
                )
                for m in range(MODELS)
            ]
            sent += await produce(bootstrap, topics["requests"], values)
            await asyncio.sleep(0.25)

    producing = asyncio.create_task(events())
    worker = start_worker(config, app_id="closers", **env)
    leases = LeaseWatch(aredis, Keys(prefix))
    kills = 0
    try:
        while kills < KILLS:
            # kill points, in turn: a window is being published (its lease holds the worker's id), or its
            # lease was just marked done (the moment a closer that did not wait for the broker lost it all)
            point = "publishing" if kills % 2 else "done"
            await wait_until(
                lambda point=point: leases.at(point),
                timeout=120,
                interval=0.005,
                what=f"a window lease {point} (kill {kills + 1})",
            )
            os.kill(worker.proc.pid, signal.SIGKILL)
            worker.proc.wait()
            kills += 1
            worker = start_worker(config, app_id="closers", **env)
        await producing
        await wait_until(
            lambda: counted(out, topics) >= sent,
            timeout=180,
            what=lambda: f"{counted(out, topics)} of {sent} events in aggregates",
        )
        await asyncio.sleep(3)  # quiescence: nothing more (a bounded wait is the point: no extra copies)
    finally:
        producing.cancel()
        reader.cancel()
        await asyncio.gather(producing, reader, return_exceptions=True)

    aggregates: dict[tuple[bytes | None, str], bytes] = {}
    alerts: dict[bytes | None, bytes] = {}
    repeats = 0
    for record in out:
        doc = orjson.loads(record.value)
        if record.topic == topics["aggregates"]:
            first = aggregates.setdefault((record.key, doc["window"]["start"]), record.value)
        else:
            first = alerts.setdefault(record.key, record.value)
        repeats += first is not record.value
        assert first == record.value, "a repeat differs from the first copy"
    assert counted(out, topics) == sent == 120 * MODELS  # each event in exactly one published aggregate
    # an alert per aggregate: the id is the rule, the window and the aggregate's key (model:suite:version)
    expected = {f"every-window:{SIZE}:{start}:{key.decode()}".encode() for key, start in aggregates if key}
    assert set(alerts) == expected
    print(f"{len(aggregates)} aggregates and {len(alerts)} alerts over {kills} kills; {repeats} repeats")


class LeaseWatch:
    """Looks at the leases of the windows due last (and the one before) in Redis."""

    def __init__(self, client: aioredis.Redis, keys: Keys) -> None:
        self.client, self.keys = client, keys
        self.last: dict[str, bytes | None] = {}

    async def at(self, point: str) -> bool:
        """Whether such a lease is held by a worker (``publishing``), or turned ``done`` since the last look."""
        seconds, micros = await self.client.time()
        due = int((seconds + micros / 1e6 - 1 - SIZE) // SIZE * SIZE)
        for start in (due, due - SIZE):
            key = self.keys.lease(SIZE, start)
            value, before = await self.client.get(key), self.last.get(key)
            self.last[key] = value
            if point == "publishing" and value not in (None, b"done"):
                return True
            if point == "done" and value == b"done" and before not in (None, b"done"):
                return True
        return False


def counted(out: list[Record], topics: dict[str, str]) -> int:
    """Events counted in the distinct aggregates published so far."""
    seen: dict[tuple[bytes | None, str], int] = {}
    for record in out:
        if record.topic == topics["aggregates"]:
            doc = orjson.loads(record.value)
            seen[(record.key, doc["window"]["start"])] = doc["count"]
    return sum(seen.values())
