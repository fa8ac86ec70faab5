"""The human-label join and the review queue on a real Redis Cluster: no CROSSSLOT, the same figures."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator

import pytest
from _feedback_helpers import NOW, label, result
from cluster_support import Cluster, redis_cluster  # noqa: F401

from streameval import keyspace
from streameval.features.labels import LabelStore, VerdictRecorder
from streameval.features.review import ReviewConfig, ReviewQueue
from streameval.store import ResultStore

pytestmark = pytest.mark.integration


@pytest.fixture
async def cluster_client(redis_cluster: Cluster) -> AsyncIterator[keyspace.Client]:  # noqa: F811
    client = keyspace.connect(redis_cluster.url, max_connections=32)
    yield client
    await client.aclose()


async def test_join_wait_and_review_on_a_cluster(cluster_client: keyspace.Client) -> None:
    prefix = f"c{random.randrange(1 << 30)}:"
    labels = LabelStore(cluster_client, keyspace.Keys(prefix), windows=(60,), clock=lambda: NOW, wait_s=30)
    store = ResultStore(
        cluster_client, prefix=prefix, windows=(60,), clock=lambda: NOW, recorders=[VerdictRecorder(labels)]
    )
    rng = random.Random(4)
    results = [
        result(f"k{i}", {"alpha": float(rng.randrange(11)), "beta": 5.0, "gamma": 1.0}) for i in range(50)
    ]
    early = await labels.join([label("k0", passed=True, annotator="x")], now=NOW)
    assert early.waiting == 1
    await store.record_many([(r, r.model_dump_json().encode(), None) for r in results])
    report = await labels.join([label(r.id, score=rng.random(), annotator="a") for r in results[1:]])
    assert (report.joined, report.waiting) == (49, 0) and report.calls <= 49
    assert (await labels.retry_waiting(now=NOW + 5)).joined == 1
    pair = store.pair_id("m", "qa")
    figures = (await labels.agreement([pair]))[pair]
    assert figures is not None and figures.labels == 50 and figures.raters["judge:alpha"].n == 50
    # a second reader (the API) loads the layouts from the cluster
    reader = LabelStore(cluster_client, store.keys, windows=(60,))
    assert (await reader.agreement([pair]))[pair] == figures
    queue = ReviewQueue(cluster_client, store.keys, ReviewConfig(rate_per_min=3, spread=3.0))
    items = await queue.select([(pair, r, None) for r in results], NOW)
    assert len(items) == 3 and all("judges_disagree" in i.reasons for i in items)
