"""The state layer on a real Redis Cluster (3 masters + 3 replicas started by the test).

Store, window closer, alerts, registry, judge cache and dashboard reads: no CROSSSLOT anywhere, exact
figures, and a master killed mid-stream (its replica promoted) loses nothing and counts nothing twice.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis
from aiohttp.test_utils import TestClient, TestServer
from cluster_support import Cluster, redis_cluster  # noqa: F401

from streameval import keyspace
from streameval.alerts import AlertRule
from streameval.api import create_web_app
from streameval.judges import JudgeCache
from streameval.judges._cache import CachedAnswer
from streameval.models import EvaluatorResult, GradedResult, format_time
from streameval.outputs import Publish
from streameval.registry import CodeConfig, LiveRegistry, RegistryStore
from streameval.store import PUBLISHED, Receipt, ResultStore, retry_forever
from streameval.windows import WindowCloser

pytestmark = pytest.mark.integration
T0 = 1_800_000_000
SIZE = 10


def result(i: int, model: str, suite: str, score: float, at: float) -> GradedResult:
    return GradedResult(
        id=f"e{i}",
        model=model,
        suite=suite,
        score=score,
        passed=score >= 0.6,
        threshold=0.6,
        grade="good" if score >= 0.6 else "fail",
        evaluators=[EvaluatorResult(name="ev", score=score, passed=score >= 0.6, weight=1)],
        event_time=format_time(at),
        evaluated_at=format_time(at),
        latency_ms=1.0,
        pipeline_version="t",
    )


@pytest.fixture
async def cluster_client(redis_cluster: Cluster) -> AsyncIterator[keyspace.Client]:  # noqa: F811
    client = keyspace.connect(redis_cluster.url, max_connections=32)
    yield client
    await client.aclose()


@pytest.fixture
def cprefix() -> str:
    return f"streameval-test:{uuid.uuid4().hex[:12]}:"


async def test_store_closer_alerts_and_reads_on_a_cluster(
    cluster_client: keyspace.Client, cprefix: str
) -> None:
    await keyspace.ping(cluster_client, "redis+cluster://test")
    now = [T0 + 1.0]
    store = ResultStore(
        cluster_client, prefix=cprefix, windows=(SIZE, 3600), allowed_lateness_s=1, clock=lambda: now[0]
    )
    models = [f"model-{i}" for i in range(12)]  # spread over the three masters
    items = [
        (
            result(i, models[i % 12], "qa", (i % 5) / 4, T0 + i % SIZE),
            f"r{i}".encode(),
            None,
            f"raw{i}".encode(),
        )
        for i in range(600)
    ]
    for i in range(0, 600, 100):
        assert await store.record_many(items[i : i + 100], [("schema", f"t:0:{i}", T0)]) == [None] * 100
    assert await store.record_many(items[:50]) == [f"r{i}".encode() for i in range(50)]  # redelivered
    aggregates = await store.all_time()
    assert len(aggregates) == 12 and sum(a.count for a in aggregates) == 600
    assert sum(a.fields["sum"] for a in aggregates) == pytest.approx(sum(r.score for r, *_ in items))
    assert await store.dead_letter_counts() == {"schema": 6}

    rule = AlertRule(name="low", metric="mean_score", comparator="<", threshold=0.9, window=SIZE, min_count=1)
    sent: list[tuple[str, bytes]] = []

    async def send(message: Publish) -> None:
        sent.append((message.kind, message.key or b""))

    async def clock() -> float:
        return now[0]

    now[0] = T0 + SIZE + 2  # lateness 1 s + the cluster's clock margin 1 s
    closers = [
        WindowCloser(store, [rule], allowed_lateness_s=1, clock=clock, worker_id=f"w{i}") for i in range(2)
    ]
    assert sum(await asyncio.gather(*(c.run_once(send) for c in closers))) == 1
    assert (
        sum(kind == "aggregate" for kind, _ in sent) == 12 and sum(kind == "alert" for kind, _ in sent) == 12
    )
    assert await store.record_many([(result(999, "model-0", "qa", 1.0, T0 + 2), b"late", None)]) == [None]
    assert (await store.window(SIZE, T0 + SIZE, "model-0", "qa")).fields["late_redirected"] == 1

    registry = RegistryStore(cluster_client, prefix=cprefix)
    record = await registry.create(
        name="x", description=None, config=CodeConfig(language="python", code="def evaluate(a): return 1")
    )
    assert [r.id for r in await registry.list()] == [record.id] and await registry.revision() == 1
    assert await registry.delete(record)

    cache = JudgeCache(cluster_client, prefix=cprefix)
    keys = [cache.key("j", "m", "1", "sys", f"user {i}") for i in range(40)]
    await asyncio.gather(*(cache.put(k, CachedAnswer(f"a{i}", 1, 2)) for i, k in enumerate(keys)))
    answers = await asyncio.gather(*(cache.get(k) for k in keys))
    assert [a.text if a else None for a in answers] == [f"a{i}" for i in range(40)]

    app = create_web_app(cluster_client, prefix=cprefix, token=None, windows=(SIZE, 3600))
    async with TestClient(TestServer(app)) as client:
        resp = await client.get("/api/v1/stats/pairs?limit=5&offset=10")
        assert resp.status == 200 and resp.headers["X-Total-Count"] == "12"
        assert [p["model"] for p in (await resp.json())["data"]] == ["model-8", "model-9"]
        windows = (await (await client.get("/api/v1/stats/windows")).json())["data"]
        assert sum(p["count"] for s in windows["series"] for p in s["points"]) == 601
        dead = (await (await client.get("/api/v1/stats/deadletters")).json())["data"]
        assert dead["total"] == {"schema": 6}


async def test_a_master_killed_mid_stream_loses_nothing_and_counts_nothing_twice(
    redis_cluster: Cluster,  # noqa: F811 (the fixture, imported)
    cluster_client: keyspace.Client,
    cprefix: str,
) -> None:
    store = ResultStore(cluster_client, prefix=cprefix, windows=(60,))
    models = [f"m{i}" for i in range(9)]
    batches = [
        [
            (result(b * 50 + i, models[(b + i) % 9], "qa", 0.5, T0), b"r", None, f"{b}-{i}".encode())
            for i in range(50)
        ]
        for b in range(40)
    ]
    published: dict[int, int] = {}
    victim = redis_cluster.masters()[0]

    async def stream() -> None:
        for b, batch in enumerate(batches):
            receipt = Receipt()
            await retry_forever(
                lambda batch=batch, receipt=receipt: store.record_many(batch, receipt=receipt),
                what="test batch",
                max_delay=0.5,
            )
            published[b] = len(batch)
            store.published([receipt])  # the broker acknowledged it: its marks ride along with the next
            if b == 10:
                # what the master acknowledged reaches its replica first: this test is about the failover
                # (retries, nothing counted twice), not asynchronous replication's own window
                redis_cluster.wait_replicated(victim)
                redis_cluster.kill(victim)  # the stream goes on while the replica takes over
            await asyncio.sleep(0)

    await asyncio.wait_for(stream(), timeout=120)
    redis_cluster.wait_ok()
    assert sum(published.values()) == 2000
    aggregates: Any = await retry_forever(store.all_time, what="read", max_delay=0.5)
    assert sum(a.count for a in aggregates) == 2000
    assert victim not in redis_cluster.masters()
    # everything redelivered (a new consumer group, say): every result was marked published, also across
    # the failover, so none is published again and nothing counts twice
    await retry_forever(lambda: store.flush_published(0), what="marks", max_delay=0.5)
    duplicates = 0
    for batch in batches:
        replies = await retry_forever(
            lambda batch=batch: store.record_many(batch), what="again", max_delay=0.5
        )
        duplicates += sum(reply != PUBLISHED for reply in replies)
    sys.stderr.write(f"\nmaster killed mid-stream: 2000 events, 0 lost, {duplicates} published again\n")
    assert duplicates == 0
    aggregates = await retry_forever(store.all_time, what="read", max_delay=0.5)
    assert sum(a.count for a in aggregates) == 2000


async def test_a_worker_registry_follows_changes_on_a_cluster(
    cluster_client: keyspace.Client, cprefix: str
) -> None:
    store = RegistryStore(cluster_client, prefix=cprefix)
    live = LiveRegistry(store, resync_s=0.2)
    await live.start()
    try:
        record = await store.create(
            name="follow",
            description=None,
            config=CodeConfig(language="python", code="def evaluate(a): return 1"),
        )
        deadline = asyncio.get_running_loop().time() + 10
        while live.get(name="follow") != record:  # pub/sub (or the resync) brings it
            assert asyncio.get_running_loop().time() < deadline, "the live registry never saw the new record"
            await asyncio.sleep(0.05)
    finally:
        await live.close()


async def test_a_batch_waits_for_replicas_when_asked(
    redis_cluster: Cluster,  # noqa: F811 (the fixture, imported)
    cluster_client: keyspace.Client,
    cprefix: str,
) -> None:
    """STREAMEVAL_REDIS_WAIT_REPLICAS: WAIT on every master written to; too few replicas is an outage."""
    from streameval.errors import StoreUnavailable

    for port in set(redis_cluster.ports) - set(
        redis_cluster.alive()
    ):  # a master killed earlier: back as a replica
        redis_cluster.start_node(port)
    redis_cluster.wait_ok()
    deadline = time.monotonic() + 60
    while not all(
        redis.Redis(port=p).info("replication").get("connected_slaves", 0) >= 1
        for p in redis_cluster.masters()
    ):
        assert time.monotonic() < deadline, "a master has no replica"
        await asyncio.sleep(0.2)

    items = [
        (result(i, f"model-{i % 6}", "qa", 0.5, T0 + i % SIZE), f"r{i}".encode(), None) for i in range(60)
    ]
    store = ResultStore(
        cluster_client, prefix=cprefix, windows=(SIZE,), clock=lambda: T0 + 1.0, wait_replicas=1
    )
    assert await store.record_many(items) == [None] * 60  # each master has one replica
    greedy = ResultStore(
        cluster_client,
        prefix=cprefix,
        windows=(SIZE,),
        clock=lambda: T0 + 1.0,
        wait_replicas=2,
        wait_timeout_ms=100,
    )
    more = [(result(100 + i, f"model-{i % 6}", "qa", 0.5, T0), b"x", None) for i in range(6)]
    with pytest.raises(StoreUnavailable, match="STREAMEVAL_REDIS_WAIT_REPLICAS=2"):
        await greedy.record_many(more)
    # the retry finds the batch counted once (its writes were made, only not acknowledged by 2 replicas)
    assert await store.record_many(more) == [b"x"] * 6
    assert sum(a.count for a in await store.all_time()) == 66
