"""The walking skeleton on the real broker (Tansu) and a real Redis, with real worker processes.

1,000 events of which 50 are invalid -> exactly 950 results and 50 dead letters; replaying the
topic from the start with a new consumer group changes no aggregate, publishes no result again (the
broker has them: published marks) and republishes the dead letters; the offline ``evaluate`` gives the same results as the stream.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis

from streameval.cli import main as cli_main
from streameval.embedded import EmbeddedBroker
from streameval.kafka_io import Record, collect, ensure_topics, produce
from streameval.store import hash_fields

from ._topics import read_all

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
MAX_EVENT_BYTES = 65536


def make_events(valid: int, invalid: int, seed: int = 11) -> tuple[list[bytes], set[str]]:
    """``valid`` events built from the example file (fresh ids, fixed timestamps) and ``invalid`` bad ones."""
    rng = random.Random(seed)
    templates = []
    for line in (EXAMPLES / "events.jsonl").read_bytes().splitlines():
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(event.get("output"), str) and "suite" not in event and "timestamp" not in event:
            templates.append(event)
    events: list[bytes] = []
    ids = set()
    for i in range(valid):
        event = dict(
            rng.choice(templates),
            id=f"it-{i:05d}",
            timestamp=f"2026-11-21T10:{i // 60 % 60:02d}:{i % 60:02d}Z",
        )
        ids.add(event["id"])
        events.append(orjson.dumps(event))
    bad_kinds: list[Callable[[int], bytes]] = [
        lambda i: b"not json %d" % i,  # invalid_json
        lambda i: b'{"id": "bad-%d", "model": "m"' % i,  # truncated: invalid_json
        lambda i: b"\xff\xfe" + b"x" * i,  # not UTF-8: invalid_json
        lambda i: b'{"id": "bad-%d", "model": "m", "output": 7}' % i,  # schema
        lambda i: b'{"id": "bad-%d", "output": "x"}' % i,  # schema: no model
        lambda i: b'{"id": "bad-%d", "model": "m", "output": "x", "suite": "nope"}' % i,  # unknown_suite
        lambda i: orjson.dumps(
            {"id": f"bad-{i}", "model": "m", "output": "x" * MAX_EVENT_BYTES}
        ),  # too_large
    ]
    for i in range(invalid):
        events.insert(rng.randrange(len(events) + 1), bad_kinds[i % len(bad_kinds)](i))
    return events, ids


async def snapshot(client: aioredis.Redis, prefix: str) -> dict[str, dict[bytes, bytes]]:
    """Every aggregate and dead-letter count hash under ``prefix`` (streameval.keyspace; SCAN is fine in a test)."""
    out = {}
    for pattern in (f"{prefix}{{*}}:all", f"{prefix}{{*}}:w:*"):
        async for key in client.scan_iter(match=pattern, count=1000):
            out[key.decode()] = await client.hgetall(key)
    return out


def by_topic(records: list[Record], topic: str) -> list[Record]:
    return [r for r in records if r.topic == topic]


async def test_thousand_events_replay_and_offline_agree(
    broker: EmbeddedBroker,
    start_worker: Callable[..., Any],
    topics: dict[str, str],
    prefix: str,
    aredis: aioredis.Redis,
    tmp_path: Path,
) -> None:
    events, valid_ids = make_events(950, 50)
    await ensure_topics(broker.bootstrap, topics.values(), partitions=2)
    await produce(broker.bootstrap, topics["requests"], events)
    config = EXAMPLES / "suites.yaml"
    out_topics = [topics["results"], topics["deadletter"]]

    first = start_worker(config, app_id="group-a", STREAMEVAL_MAX_EVENT_BYTES=str(MAX_EVENT_BYTES))
    records = await collect(broker.bootstrap, out_topics, until=lambda r: len(r) >= 1000, timeout=120)
    results = by_topic(records, topics["results"])
    dead = by_topic(records, topics["deadletter"])
    assert len(results) == 950 and len(dead) == 50
    assert {r.key.decode() for r in results if r.key} == valid_ids
    kinds = Counter(orjson.loads(d.value)["kind"] for d in dead)
    assert set(kinds) == {"invalid_json", "schema", "unknown_suite", "too_large"}
    before = await snapshot(aredis, prefix)
    all_time = {k: v for k, v in before.items() if k.endswith(":all") and k != f"{prefix}{{dl}}:all"}
    assert sum(int(hash_fields(v)["count"]) for v in all_time.values()) == 950
    assert sum(int(v) for v in before[f"{prefix}{{dl}}:all"].values()) == 50
    assert first.stop() == 0
    assert len(await read_all(broker.bootstrap, out_topics)) == 1000  # exactly: no extra copies

    # Replay everything with a new consumer group within the redelivery horizon: the broker has every
    # result (published marks), so no result is published again; the dead letters are; nothing counted twice.
    second = start_worker(config, app_id="group-b", STREAMEVAL_MAX_EVENT_BYTES=str(MAX_EVENT_BYTES))
    await collect(broker.bootstrap, out_topics, until=lambda r: len(r) >= 1050, timeout=120)
    assert second.stop() == 0
    records = await read_all(broker.bootstrap, out_topics)
    assert len(by_topic(records, topics["deadletter"])) == 100
    assert len(records) == 1050, "a result the broker had was published again"
    assert await snapshot(aredis, prefix) == before
    copies: dict[bytes, set[bytes]] = {}
    for record in by_topic(records, topics["results"]):
        copies.setdefault(record.key or b"", set()).add(record.value)
    assert len(copies) == 950
    assert all(len(values) == 1 for values in copies.values()), "a replayed result differs from the first"

    # Offline evaluation of the same bytes gives the same results.
    source = tmp_path / "events.jsonl"
    source.write_bytes(b"\n".join(events) + b"\n")
    exit_code = await asyncio.to_thread(
        cli_main,
        [
            "evaluate",
            "--config",
            str(config),
            "--input",
            str(source),
            "--output",
            str(tmp_path / "out.jsonl"),
            "--max-event-bytes",
            str(MAX_EVENT_BYTES),
            "--quiet",
        ],
    )
    assert exit_code == 0
    volatile = {"evaluated_at", "latency_ms"}
    offline = {
        r["id"]: {k: v for k, v in r.items() if k not in volatile}
        for r in map(orjson.loads, (tmp_path / "out.jsonl").read_bytes().splitlines())
    }
    streamed = {
        r["id"]: {k: v for k, v in r.items() if k not in volatile}
        for r in (orjson.loads(next(iter(v))) for v in copies.values())
    }
    assert offline == streamed
    offline_dead = Counter(
        orjson.loads(x)["kind"] for x in (tmp_path / "out.deadletter.jsonl").read_bytes().splitlines()
    )
    assert offline_dead == kinds
