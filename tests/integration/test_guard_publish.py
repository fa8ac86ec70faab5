"""``publish: true`` on the real Tansu broker and Redis: checks made through a worker's own web server go to
its requests topic with the source header, and the stream counts each event once by id, however often it
is checked again (a client's retry) or delivered again (the same message twice on the topic)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import yaml
from _support import wait_until
from aiokafka import AIOKafkaConsumer

from streameval.embedded import EmbeddedBroker
from streameval.features.guard._publish import SOURCE_HEADER
from streameval.guard_client import AsyncGuardClient
from streameval.kafka_io import collect, produce

pytestmark = pytest.mark.integration

TOKEN = "guard-publish-token-0123456789"
SUITE = {
    "suites": [
        {
            "name": "support",
            "default": True,
            "evaluators": [{"evaluator": "contains", "params": {"value": "ORD-"}}],
            "guard": {"publish": True, "deadline_ms": 5000},
        }
    ]
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _published(bootstrap: str, topic: str, count: int) -> list[tuple[list[tuple[str, bytes]], bytes]]:
    """The first ``count`` messages of ``topic``: (headers, value)."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    try:
        found: list[tuple[list[tuple[str, bytes]], bytes]] = []
        async with asyncio.timeout(60):
            while len(found) < count:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    found += [(list(r.headers), r.value or b"") for r in records]
        return found
    finally:
        await consumer.stop()


async def test_published_checks_are_counted_once_by_id(
    broker: EmbeddedBroker, start_worker: Callable[..., Any], topics: dict[str, str], tmp_path: Path
) -> None:
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    config = tmp_path / "suites.yaml"
    config.write_text(yaml.safe_dump(SUITE), encoding="utf-8")
    start_worker(config, STREAMEVAL_WEB_PORT=str(port), STREAMEVAL_API_TOKEN=TOKEN)
    async with httpx.AsyncClient(base_url=base) as http:
        await wait_until(
            lambda: http.get("/health"),
            timeout=120,
            what="the worker's web server",
            ignore=(httpx.TransportError,),
        )

    outputs = {f"c{i}": (f"Order ORD-{i} ships" if i % 2 else "no order number") for i in range(5)}
    async with AsyncGuardClient(base, token=TOKEN, timeout=30) as client:
        first = {id: await client.check(text, id=id) for id, text in outputs.items()}
        retried = [await client.check(outputs[id], id=id) for id in ("c0", "c1", "c2")]
    assert all(a.raw["published"] is True for a in [*first.values(), *retried])
    assert [first[id].decision for id in outputs] == ["block", "allow", "block", "allow", "block"]

    published = await _published(broker.bootstrap, topics["requests"], 8)
    assert all(headers == [SOURCE_HEADER] for headers, _ in published)
    assert sorted(orjson.loads(value)["id"] for _, value in published) == sorted([*outputs, "c0", "c1", "c2"])
    # the broker delivers c3's message once more (the same bytes again)
    again = next(value for _, value in published if orjson.loads(value)["id"] == "c3")
    await produce(broker.bootstrap, topics["requests"], [again])

    # all 9 request messages taken by the worker: a repeat whose result the broker already had (published
    # mark) is answered with nothing, one not yet marked with its stored copy (docs/guarantees.md)
    async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {TOKEN}"}) as http:

        async def taken() -> bool:
            text = (await http.get("/metrics")).text
            line = next(x for x in text.splitlines() if x.startswith("streameval_events_in_total"))
            return float(line.split()[-1]) >= 9

        await wait_until(taken, timeout=120, what="the worker to take the 9 request messages")
    records = await collect(
        broker.bootstrap,
        [topics["results"]],
        until=lambda r: {orjson.loads(x.value)["id"] for x in r} >= set(outputs),
        timeout=120,
    )
    results = [orjson.loads(r.value) for r in records]
    assert sorted({r["id"] for r in results}) == sorted(outputs)
    assert 5 <= len(results) <= 9
    copies: dict[str, set[bytes]] = {}
    for r in records:
        copies.setdefault(orjson.loads(r.value)["id"], set()).add(r.value)
    assert all(len(v) == 1 for v in copies.values())  # a repeat is the same bytes
    by_id = {r["id"]: r for r in results}
    assert [by_id[id]["passed"] for id in outputs] == [
        False,
        True,
        False,
        True,
        False,
    ]  # as the guard decided

    async with httpx.AsyncClient(base_url=base) as http:
        pairs = (await http.get("/api/v1/stats/pairs")).json()["data"]
    assert [(p["model"], p["suite"], p["count"]) for p in pairs] == [("unknown", "support", 5)]
