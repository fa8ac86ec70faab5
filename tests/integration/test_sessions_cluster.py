"""Sessions on a real Redis Cluster (3 masters + 3 replicas started by the test): turns appended, due
index shards and session state spread over the masters, closing and revision figures without CROSSSLOT."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator

import orjson
import pytest
from cluster_support import Cluster, redis_cluster  # noqa: F401

from streameval import keyspace
from streameval.config import parse_config_text
from streameval.features.sessions.closer import SessionCloser
from streameval.features.sessions.state import SessionStore, session_terms
from streameval.features.sessions.turns import turns_in
from streameval.features.setup import annotators
from streameval.models import SessionResult, format_time
from streameval.outputs import Publish
from streameval.pipeline import Pipeline
from streameval.store import ResultStore

pytestmark = pytest.mark.integration

CONFIG = """
suites: [{name: chat, default: true, evaluators: [{evaluator: exact_match}]}]
sessions: [{name: conv, key: metadata.c, end: metadata.last, gap_s: 60, grace_s: 60}]
"""


@pytest.fixture
async def cluster_client(redis_cluster: Cluster) -> AsyncIterator[keyspace.Client]:  # noqa: F811
    client = keyspace.connect(redis_cluster.url, max_connections=32)
    yield client
    await client.aclose()


async def test_sessions_on_a_cluster(cluster_client: keyspace.Client) -> None:
    prefix = f"streameval-test:{uuid.uuid4().hex[:12]}:"
    _, suites = parse_config_text(CONFIG)
    pipeline = Pipeline(suites, annotators=annotators(suites))
    store = ResultStore(cluster_client, prefix=prefix, windows=(60,))
    state = SessionStore(cluster_client, session_terms(suites.sessions, 0.0), prefix=prefix)
    closer = SessionCloser(state, store, pipeline, suites.sessions)
    now = time.time()
    turns = []
    for c in range(40):
        for i in range(3):
            event = {
                "id": f"c{c}-{i}",
                "model": "m",
                "output": "a" if i else "b",
                "expected": "a",
                "timestamp": format_time(now - 30 + i),
                "metadata": {"c": f"c{c}", "last": i == 2},
            }
            turns += turns_in((await pipeline.process(orjson.dumps(event))).annotations)
    report = await state.append(turns)
    assert dict(report.counts) == {("conv", "appended"): 120}
    sent: list[Publish] = []

    async def send(message: Publish) -> None:
        sent.append(message)

    assert await closer.run_once(send) == 40
    results = [SessionResult.model_validate_json(m.value) for m in sent]
    assert sorted(r.key for r in results) == sorted(f"c{c}" for c in range(40))
    late = [
        t
        for t in turns_in(
            (
                await pipeline.process(
                    orjson.dumps(
                        {
                            "id": "c0-3",
                            "model": "m",
                            "output": "a",
                            "expected": "a",
                            "timestamp": format_time(now - 26),
                            "metadata": {"c": "c0"},
                        }
                    )
                )
            ).annotations
        )
    ]
    assert dict((await state.append(late)).counts) == {("conv", "revised"): 1}
    assert await closer.run_once(send) == 1
    [figures] = await store.all_time()
    assert figures.count == 40
    assert figures.mean == pytest.approx((39 * (2 / 3) + 3 / 4) / 40)
