"""The exact-accounting and kill -9 integration tests again, with the workers on a real Redis Cluster.

The tests are imported from their modules: pytest collects them here a second time, with the fixtures
below (``redis_url``, ``aredis``, ``prefix``) pointing at a 3-master cluster the module starts.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
from cluster_support import Cluster, redis_cluster  # noqa: F401

from streameval import keyspace

from .test_faults_kill import test_kill_9_five_times_loses_nothing_and_counts_once  # noqa: F401
from .test_stream import test_thousand_events_replay_and_offline_agree  # noqa: F401

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def redis_url(redis_cluster: Cluster) -> str:  # noqa: F811
    return redis_cluster.url


@pytest.fixture
async def aredis(redis_url: str) -> AsyncIterator[keyspace.Client]:
    client = keyspace.connect(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
def prefix() -> Iterator[str]:
    yield f"streameval-test:{uuid.uuid4().hex[:12]}:"  # the module's cluster is removed afterwards
