"""The review page's tests run on one Redis and on a Redis Cluster (tests/cluster_support.py), with every
review script checked to touch only the keys it declares (tests/lua_keys.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
import redis.asyncio as aioredis
from cluster_support import Cluster, redis_cluster  # noqa: F401
from lua_keys import declared_only

from streameval import _lua, keyspace
from streameval.features.review_page import _scripts


@pytest.fixture(autouse=True)
def _declared_keys_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in _scripts.__all__:
        monkeypatch.setattr(_scripts, name, declared_only(getattr(_scripts, name)))
    monkeypatch.setattr(_lua, "REVIEW_TAKE", declared_only(_lua.REVIEW_TAKE))
    yield


@pytest.fixture(params=["redis", pytest.param("cluster", marks=pytest.mark.integration)])
async def aredis(request: pytest.FixtureRequest, redis_url: str) -> AsyncIterator[keyspace.Client]:
    """One Redis, or a Redis Cluster of 3 masters and 3 replicas."""
    if request.param == "cluster":
        cluster: Cluster = request.getfixturevalue("redis_cluster")
        client = keyspace.connect(cluster.url)  # a pool as large as the worker's
    else:
        client = aioredis.Redis.from_url(redis_url)
    yield client
    await client.aclose()
